"""The storefront's domain: the purchase flow and its seams to storage, Brevo and MCP clients.

Nothing here imports `azure.functions`; `function_app.py` is the only glue to the host. Five
layers, each importing only from the layers below it (docs/development.md#layout draws them):
`protocols/` over `purchase/` over `exactly_once/` over `seams/` over `config/`, with
`runtime.py` building the process's services from the settings.
"""

__version__ = "0.1.0"
