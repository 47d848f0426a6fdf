"""The app's widgets: one concept a module, each with its CSS, bindings and messages."""
