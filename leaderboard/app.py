"""Entry point of the leaderboard as a Hugging Face Space: ``python leaderboard/app.py``.

The app itself is :mod:`mlenergy.leaderboard.app`: from the installed package, or in a Space
from the ``mlenergy/`` folder copied beside this file (``requirements.txt`` holds the app's
runtime, see ``README.md``). The store is ``$MLENERGY_DATA_DIR``, else ``data``.
"""

from mlenergy.leaderboard.app import main

if __name__ == "__main__":
    main()
