"""mosaic-tui: the client side (the `mosaic` CLI and the Textual app)."""
