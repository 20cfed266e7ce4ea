"""The purchase: what a free bundle is, the guards, the steps that hand one out, the download token,
the signed receipt and the email, and `Storefront` (in `storefront`) wiring them to the executor."""
