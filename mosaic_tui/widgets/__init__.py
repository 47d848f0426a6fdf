"""The app's widgets: one concept a module, each with its CSS, bindings and messages."""


def leaving(node) -> bool:
    """Whether ``node``'s screen is being removed: popped, or the app is exiting.

    Textual mounts nothing more under a widget being removed (``Widget.mount`` returns at
    once when the widget is pruning) but still runs the ``on_mount`` of every widget that was
    already in the tree, so a screen closed while it was still being built (the app exiting
    as a run opens under load) is only partly there: its handlers must not look for their
    children then. Otherwise, once a widget's ``on_mount`` runs, everything it composed is
    mounted."""
    try:
        screen = node.screen
    except Exception:           # NoScreen: not in a screen any more
        return True
    app = node.app
    return not app.is_running or screen not in app.screen_stack
