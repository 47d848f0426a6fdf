"""Drawing frames in a terminal: half-blocks, sixel, kitty graphics, and finding
out which of them the terminal can show.

Client side only: nothing here imports torch, ray or xuance, and each module
imports what it needs (numpy, rich, Pillow) itself, so importing this package
costs nothing.
"""
