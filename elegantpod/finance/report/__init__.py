"""The backtest report: one self-contained HTML page, and pyfolio's formats.

- ``report``: the page, assembled and written.
- ``tearsheet``, ``tearsheet_html``: what a tear sheet shows, and its HTML.
- ``charts``: matplotlib figures as PNG bytes; ``markup``: named, escaped tables.
- ``pyfolio_export``: returns, positions and transactions in pyfolio's formats.
"""
