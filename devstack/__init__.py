"""The local stack that stands in for Azure and Brevo in development and tests: the Functions dev
host, the Brevo sandbox, the Azurite launcher (`make run`) and the bundle seeder. Never deployed."""
