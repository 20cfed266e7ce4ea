"""The rules SL001 to SL008, and the rule set that runs them over a tools list."""
