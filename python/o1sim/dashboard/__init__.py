"""The o1sim dashboard (``o1sim dashboard``: a Streamlit app in ``app.py``) and the Altair
charts it shares with ``o1sim report`` and the notebook (``charts.py``).

Importing this package does not import Streamlit; the charts need Altair
(``pip install 'o1sim[dashboard]'``).
"""

from pathlib import Path

#: The Streamlit script that ``o1sim dashboard`` runs.
APP_PATH = Path(__file__).with_name("app.py")

__all__ = ["APP_PATH"]
