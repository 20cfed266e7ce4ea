"""What the engines that constrain local models reject or weaken in an input schema (SL004)."""
