"""The worked steps of the stages (:mod:`worked.stages` names each stage's with it): per stage its title, its
step's explanation, lines, notes and shapes, and its NumPy code for the notebook. ``attention``: a head's
Q … Z; ``heads``: several heads side by side and W_O; ``train``: one training step. They build trees
(:mod:`worked.eq`) with the shared pieces of :mod:`worked.lines`; the solver makes the steps of them."""
