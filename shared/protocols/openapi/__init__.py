"""The OpenAPI 3.1 document of the HTTP endpoints: the document, its paths and its schemas."""
