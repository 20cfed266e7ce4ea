"""The storefront's domain: the purchase flow and its seams to storage, Brevo and MCP clients.

Nothing here imports `azure.functions`; `function_app.py` is the only glue to the host.
"""

__version__ = "0.1.0"
