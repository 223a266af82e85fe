"""Slider panels that re-run code in the kernel (ipywidgets): on a GPU, the live measurement.

The pictures themselves are browser panels (``tcourse.webviz``) that need no kernel; a live panel
re-measures and shows a fresh browser picture. ``continuous_update=False`` so a GPU re-run happens
when the slider is released, not on every pixel.
"""
from __future__ import annotations

import ipywidgets as w
from IPython.display import display


def choice(options, value=None, description: str = ""):
    """A slider over a fixed list (powers of two, warp counts...)."""
    options = list(options)
    return w.SelectionSlider(options=options, value=options[0] if value is None else value,
                             description=description, continuous_update=False,
                             style={"description_width": "9em"}, layout=w.Layout(width="32em"))


def panel(render, **controls) -> w.VBox:
    """Show ``controls`` (one per row) above an output area that ``render(**values)`` redraws on every change."""
    for name, c in controls.items():
        if not c.description:
            c.description = name
    out = w.interactive_output(render, controls)
    box = w.VBox([*controls.values(), out])
    display(box)
    return box
