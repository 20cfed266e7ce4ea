"""The local stack that stands in for Azure and Brevo in development and tests: the Functions dev
host, the Brevo sandbox, the Azurite launcher (`make run`) and the bundle seeder, and what the
suite, the bench and the soak start and measure with: services on free ports, the fault proxy,
loopback clients and the round-trip counter. Never deployed."""
