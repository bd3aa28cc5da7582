"""Entry point of the leaderboard as a Hugging Face Space: ``python leaderboard/app.py``.

The app itself is :mod:`mlenergy.leaderboard.app` (installed with the package, see
``requirements.txt``); the store is ``$MLENERGY_DATA_DIR``, else ``data``.
"""

from mlenergy.leaderboard.app import main

if __name__ == "__main__":
    main()
