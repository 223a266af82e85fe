"""Slider panels: ipywidgets controls over one render function.

``continuous_update=False`` so a GPU re-run happens when the slider is released, not on every pixel.
"""
from __future__ import annotations

import ipywidgets as w
from IPython.display import display


def choice(options, value=None, description: str = ""):
    """A slider over a fixed list (powers of two, warp counts...)."""
    options = list(options)
    return w.SelectionSlider(options=options, value=options[0] if value is None else value,
                             description=description, continuous_update=False,
                             style={"description_width": "initial"})


def panel(render, **controls) -> w.VBox:
    """Show ``controls`` above an output area that ``render(**values)`` redraws on every change."""
    for name, c in controls.items():
        if not c.description:
            c.description = name
    out = w.interactive_output(render, controls)
    box = w.VBox([w.HBox(list(controls.values())), out])
    display(box)
    return box
