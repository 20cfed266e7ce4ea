"""Reading JSON Schema as the rules need it: walking a schema, and where a pattern compiles."""
