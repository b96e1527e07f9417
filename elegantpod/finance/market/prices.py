"""Market data: FinRL's long format or a wide table of closes, validated, and a real sample.

Everything downstream (indicators, the trading env, backtests) reads one
:class:`MarketData`: dates x tickers arrays of prices with the same dates for every
ticker. Loading is where bad data is caught, with an error that names the ticker and the
date, because a NaN or a missing day that slips into training silently corrupts rewards.

No data is downloaded at run time. :func:`sp500_sample` reads 20 S&P 500 stocks' daily
adjusted closes, 1990-2022, shipped inside the package (from skfolio's datasets, BSD-3,
see ``data/NOTICE.md``), and :func:`sp500_index` the S&P 500 index over the same dates.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from elegantpod.finance.market.names import check_name
from elegantpod.finance.market.splits import to_timestamp

logger = logging.getLogger(__name__)

PRICE_FIELDS = ("open", "high", "low", "close")
FIELDS = (*PRICE_FIELDS, "volume")
SAMPLES = ("sp500",)
"""Names :func:`load` accepts for the shipped data."""


@dataclass(frozen=True, eq=False)
class MarketData:
    """Daily prices of a fixed set of tickers over common dates.

    Arrays are ``(num_days, num_stocks)`` float64, rows in date order, columns in
    ``tickers`` order. ``close`` is required; ``open``, ``high``, ``low`` and ``volume``
    are optional (a wide table of closes has none of them).
    """

    dates: pd.DatetimeIndex
    tickers: tuple[str, ...]
    close: np.ndarray
    open: np.ndarray | None = None
    high: np.ndarray | None = None
    low: np.ndarray | None = None
    volume: np.ndarray | None = None
    source: str = ""
    """Where the data came from (a path, URL or sample name), for reports."""

    def __post_init__(self) -> None:
        shape = (len(self.dates), len(self.tickers))
        for name in FIELDS:
            arr = getattr(self, name)
            if arr is None:
                continue
            if arr.shape != shape:
                raise ValueError(f"{name} has shape {arr.shape}, expected {shape}")
            # row-major float64 everywhere: reductions over a day then add up in the same
            # order whatever layout pandas handed over, so results are bit-reproducible
            object.__setattr__(self, name, np.ascontiguousarray(arr, dtype=np.float64))
        _check_values(self)

    @property
    def num_days(self) -> int:
        """Number of trading days."""
        return len(self.dates)

    @property
    def num_stocks(self) -> int:
        """Number of tickers."""
        return len(self.tickers)

    @property
    def has_high_low(self) -> bool:
        """Whether high and low prices are present (CCI and DX need them)."""
        return self.high is not None and self.low is not None

    def locate(self, start=None, end=None) -> tuple[int, int]:
        """Row range ``[i, j)`` of the days with ``start <= date <= end`` (inclusive)."""
        i = 0 if start is None else int(self.dates.searchsorted(to_timestamp(start, "start")))
        j = (
            self.num_days
            if end is None
            else int(self.dates.searchsorted(to_timestamp(end, "end"), side="right"))
        )
        if j <= i:
            raise ValueError(
                f"no trading days between start={start!r} and end={end!r} in {self.source!r} "
                f"(it covers {self.dates[0]:%Y-%m-%d} to {self.dates[-1]:%Y-%m-%d})"
            )
        return i, j

    def between(self, start=None, end=None) -> MarketData:
        """The days with ``start <= date <= end`` (``None``: open-ended)."""
        i, j = self.locate(start, end)
        return self._rows(slice(i, j))

    def select(self, tickers) -> MarketData:
        """Only ``tickers``, in the given order; unknown ones are an error naming them."""
        tickers = tuple(str(t) for t in tickers)
        unknown = [t for t in tickers if t not in self.tickers]
        if unknown:
            raise ValueError(f"unknown tickers {unknown}; the data has {list(self.tickers)}")
        if len(set(tickers)) != len(tickers):
            raise ValueError(f"tickers repeat: {list(tickers)}")
        cols = [self.tickers.index(t) for t in tickers]
        arrays = {f: getattr(self, f)[:, cols] for f in FIELDS if getattr(self, f) is not None}
        return dataclasses.replace(self, tickers=tickers, **arrays)

    def _rows(self, rows: slice) -> MarketData:
        arrays = {f: getattr(self, f)[rows] for f in FIELDS if getattr(self, f) is not None}
        return dataclasses.replace(self, dates=self.dates[rows], **arrays)

    def closes(self) -> pd.DataFrame:
        """Wide table of closes: dates x tickers."""
        return pd.DataFrame(self.close, index=self.dates, columns=list(self.tickers))

    def to_long(self) -> pd.DataFrame:
        """FinRL's long format: one row per (date, tic), sorted by date then ticker order."""
        out = {
            "date": np.repeat(self.dates.values, self.num_stocks),
            "tic": np.tile(np.array(self.tickers, dtype=object), self.num_days),
        }
        for f in FIELDS:
            arr = getattr(self, f)
            if arr is not None:
                out[f] = arr.reshape(-1)
        return pd.DataFrame(out)

    def __repr__(self) -> str:
        span = f"{self.dates[0]:%Y-%m-%d}..{self.dates[-1]:%Y-%m-%d}" if self.num_days else ""
        return (
            f"MarketData({self.num_days} days {span}, {self.num_stocks} tickers, "
            f"source={self.source!r})"
        )


# ---------------------------------------------------------------------------- loading
def load(source: Any, **kwargs: Any) -> MarketData:
    """Load market data from a sample name, a file or URL, or a DataFrame.

    ``"sp500"`` is the shipped sample. A table with a ``tic`` column is read as FinRL's
    long format (:func:`load_long`), any other as a wide table of closes
    (:func:`load_wide`). Files may be CSV (optionally compressed) or parquet, local or
    any fsspec URL pandas can open.

    Raises
    ------
    ValueError
        A file that is missing, a directory, empty, binary or not a table, a CSV header
        that repeats a column, or data that fails :func:`load_long`'s or
        :func:`load_wide`'s checks; the message names the file. Rows out of date order
        are not an error: they are sorted (see :func:`load_long`).
    ImportError
        A parquet file without pyarrow installed.
    """
    if isinstance(source, MarketData):
        return source
    if isinstance(source, str) and source in SAMPLES:
        return sp500_sample()
    frame, label = _read_table(source)
    lowered = {str(c).strip().lower() for c in frame.columns}
    if "tic" in lowered:
        return load_long(frame, source_name=label)
    return load_wide(frame, source_name=label, **kwargs)


def load_long(source: Any, *, source_name: str | None = None) -> MarketData:
    """FinRL's long format: columns ``date, tic, close`` and optionally ``open, high, low,
    volume``; one row per (date, tic).

    Rows may come in any order (shuffled, grouped by ticker, dates descending): they are
    sorted by date. That is safe because every (date, tic) pair must be unique, so each
    price is identified by its date and ticker and the row order carries no information;
    sorting cannot merge two prices, drop one or move one to another day. Data exported
    from a database or joined from per-ticker downloads is often unordered, and refusing
    it would only make the user sort it by hand. What stays refused is data that sorting
    cannot make unambiguous: two rows for one (date, tic), named in the error. Tickers
    keep the order in which they first appear in the rows (a backtest checks that an
    agent's tickers match by name and order).

    Raises
    ------
    ValueError
        Missing or repeated columns, unparsable dates, NaN or non-positive prices, negative
        volume, duplicate (date, tic) rows (the first ones named), tickers that do not
        share the same dates, or ``high < low``.
    """
    frame, label = _read_table(source)
    label = source_name or label
    frame = frame.rename(columns={c: str(c).strip().lower() for c in frame.columns})
    repeated = frame.columns[frame.columns.duplicated()]
    if len(repeated):
        raise ValueError(
            f"long-format data {label!r} has column {repeated[0]!r} more than once "
            "(column names ignore case and surrounding spaces)"
        )
    missing = [c for c in ("date", "tic", "close") if c not in frame.columns]
    if missing:
        raise ValueError(
            f"long-format data {label!r} lacks column(s) {missing}; it has "
            f"{list(frame.columns)} (FinRL format: date, tic, open, high, low, close, volume)"
        )
    if frame.empty:
        raise ValueError(f"data {label!r} has no rows")
    frame = frame.assign(date=_parse_dates(frame["date"], label), tic=frame["tic"].astype(str))
    dup = frame.duplicated(["date", "tic"], keep=False)
    if dup.any():
        rows = frame.loc[dup, ["date", "tic"]].drop_duplicates().head(3)
        shown = ", ".join(f"({d:%Y-%m-%d}, {t!r})" for d, t in rows.itertuples(index=False))
        raise ValueError(f"data {label!r} has duplicate (date, tic) rows: {shown}")
    # No order check: each (date, tic) is unique, and the arrays below are indexed by
    # the sorted dates, whatever order the rows came in (see the docstring).
    tickers = tuple(pd.unique(frame["tic"]))
    all_dates = pd.DatetimeIndex(sorted(pd.unique(frame["date"])))
    counts = frame.groupby("tic", sort=False)["date"].size()
    short = counts[counts < len(all_dates)]
    if len(short):
        tic = short.index[0]
        have = pd.DatetimeIndex(frame.loc[frame["tic"] == tic, "date"])
        lacking = all_dates.difference(have)
        raise ValueError(
            f"data {label!r}: tickers do not share the same dates: {tic!r} lacks "
            f"{lacking[0]:%Y-%m-%d}"
            + (f" and {len(lacking) - 1} more day(s)" if len(lacking) > 1 else "")
            + f" ({len(short)} ticker(s) affected); align or drop them first"
        )
    arrays = {}
    for f in FIELDS:
        if f in frame.columns:
            wide = frame.pivot(index="date", columns="tic", values=f)
            arrays[f] = _numeric(wide.loc[all_dates, list(tickers)], f, label)
    return _noting_gaps(MarketData(dates=all_dates, tickers=tickers, source=label, **arrays))


def load_wide(
    source: Any,
    *,
    date_column: str | None = None,
    source_name: str | None = None,
    note_gaps: bool = True,
) -> MarketData:
    """A wide table of closes: one date column (or a date index) and one column per ticker.

    ``date_column`` names the date column; by default a column called ``date`` (any case)
    or else the first column, unless the frame already has a DatetimeIndex.
    ``note_gaps``: log a warning when whole trading days seem missing (5 or more calendar
    days between consecutive dates); ``False`` where the gaps are known market closures
    (the shipped sample's three: 2001-09-11, the day of mourning for President Ford on
    2007-01-02 beside New Year, and Hurricane Sandy in 2012).

    Rows may come in any order (shuffled, dates descending): they are sorted by date.
    That is safe because each row holds one whole day and every date must be unique, so
    a row's prices stay together under their date and the row order carries no
    information; unordered exports are common, and refusing them would only make the
    user sort by hand. A date that appears twice stays refused (the first one is named):
    no order makes two rows of prices for one day unambiguous.

    Raises
    ------
    ValueError
        No date column or unparsable dates, no ticker columns or no rows, a duplicate
        date, repeated ticker columns, a price that is not a positive finite number, or a
        ticker name that :func:`check_name` refuses.
    """
    frame, label = _read_table(source)
    label = source_name or label
    if frame.shape[1] == 0:
        raise ValueError(f"data {label!r} has no columns")
    if not isinstance(frame.index, pd.DatetimeIndex):
        cols = {str(c).strip().lower(): c for c in frame.columns}
        name = date_column or cols.get("date") or frame.columns[0]
        if name not in frame.columns:
            raise ValueError(f"data {label!r} has no column {name!r} for dates")
        frame = frame.set_index(name)
        frame.index = _parse_dates(pd.Series(frame.index), label)
    if frame.shape[1] == 0 or frame.empty:
        raise ValueError(f"data {label!r} has no ticker columns or no rows")
    if frame.index.has_duplicates:
        d = frame.index[frame.index.duplicated()][0]
        raise ValueError(f"data {label!r} has duplicate date {d:%Y-%m-%d}")
    if not frame.index.is_monotonic_increasing:  # dates are unique: see the docstring
        frame = frame.sort_index()
    tickers = tuple(str(c) for c in frame.columns)
    if len(set(tickers)) != len(tickers):
        raise ValueError(f"data {label!r} repeats ticker columns: {list(tickers)}")
    close = _numeric(frame, "close", label)
    data = MarketData(
        dates=pd.DatetimeIndex(frame.index), tickers=tickers, close=close, source=label
    )
    return _noting_gaps(data) if note_gaps else data


GAP_DAYS = 5
"""Calendar days between two consecutive trading days from which :func:`_noting_gaps`
notes a gap: a weekend with a holiday spans 4 (Friday to Tuesday)."""


def _noting_gaps(data: MarketData) -> MarketData:
    """``data``, after a warning when whole trading days seem missing between its dates.

    Why a note and not a refusal: markets do close for days (2001-09-11 to 09-17,
    Hurricane Sandy in 2012), so a gap may be real. But a gap left by a failed download
    or a filter makes one step of the env, and one daily return of every statistic,
    span several days, which nothing else would show; the warning names the longest gap
    so a user can tell which it is.
    """
    dates = data.dates
    if len(dates) < 2:
        return data
    steps = np.diff(dates.values).astype("timedelta64[D]").astype(int)
    wide = np.flatnonzero(steps >= GAP_DAYS)
    if len(wide):
        i = int(wide[np.argmax(steps[wide])])
        logger.warning(
            "market data %r: %d gap(s) of %d or more calendar days between consecutive "
            "trading days, the longest %s to %s (%d days): whole trading days may be "
            "missing, and a step of the env and a daily return then span the gap",
            data.source,
            len(wide),
            GAP_DAYS,
            f"{dates[i]:%Y-%m-%d}",
            f"{dates[i + 1]:%Y-%m-%d}",
            int(steps[i]),
        )
    return data


@functools.lru_cache(maxsize=4)
def _sample_closes() -> pd.DataFrame:
    path = importlib.resources.files("elegantpod.finance.market") / "data" / "sp500_closes.csv.gz"
    with importlib.resources.as_file(path) as p:
        return pd.read_csv(p, index_col=0, parse_dates=True)


def sp500_sample() -> MarketData:
    """20 S&P 500 stocks, daily adjusted closes 1990-01-02 to 2022-12-28 (8,313 days).

    Shipped with the package (from skfolio's datasets, BSD-3; see ``data/NOTICE.md``),
    for tests, examples and benchmarks: stale data, not for investment decisions.
    """
    return load_wide(_sample_closes(), source_name="sp500", note_gaps=False)


def sp500_index() -> pd.Series:
    """The S&P 500 index over the sample's dates, as a benchmark series."""
    path = importlib.resources.files("elegantpod.finance.market") / "data" / "sp500_index.csv.gz"
    with importlib.resources.as_file(path) as p:
        frame = pd.read_csv(p, index_col=0, parse_dates=True)
    return frame.iloc[:, 0].rename("S&P 500")


@functools.lru_cache(maxsize=8)
def cached_load(source: str) -> MarketData:
    """:func:`load` memoized per process: pods on one worker share one copy of the data."""
    return load(source)


# ---------------------------------------------------------------------------- helpers
def _read_table(source: Any) -> tuple[pd.DataFrame, str]:
    """The one reader of files: a frame and a label for messages.

    Every failure names the file: missing, a directory, empty, binary or not CSV,
    unreadable parquet, or a CSV header that repeats a column name (pandas would rename
    the copy ``X.1`` and load it as a ticker of its own).
    """
    if isinstance(source, pd.DataFrame):
        return source.copy(), "<DataFrame>"
    if not isinstance(source, str | Path):
        raise TypeError(
            f"market data source must be a path, URL, DataFrame or one of {SAMPLES}, "
            f"got {type(source).__name__}"
        )
    text = str(source)
    parquet = text.lower().endswith((".parquet", ".pq"))
    try:
        if parquet:
            return pd.read_parquet(text), text
        # The raw first rows: pandas de-duplicates the header it returns (X, X.1).
        header = pd.read_csv(text, header=None, nrows=3, dtype=str, keep_default_na=False)
        if _is_yfinance(header):
            return _from_yfinance(text), text
        header = header.iloc[:1]
        frame = pd.read_csv(text)
    except FileNotFoundError:
        raise ValueError(
            f"market data file {text!r} does not exist (or use a sample: {SAMPLES})"
        ) from None
    except IsADirectoryError:
        raise ValueError(f"market data path {text!r} is a directory, not a file") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"market data file {text!r} is empty") from None
    except UnicodeDecodeError:
        raise ValueError(
            f"market data file {text!r} is not a UTF-8 text CSV file (binary data?)"
        ) from None
    except ImportError as exc:
        if parquet and importlib.util.find_spec("pyarrow") is None:
            raise ImportError(
                f"reading parquet needs pyarrow: pip install pyarrow (to read {text!r})"
            ) from None
        raise ImportError(f"reading {text!r}: {exc}") from None
    except Exception as exc:  # pandas, pyarrow, gzip, urllib, fsspec and its HTTP client
        if 404 in (getattr(exc, "code", None), getattr(exc, "status", None)):
            raise ValueError(f"market data URL {text!r} does not exist (HTTP 404)") from None
        kind = "parquet" if parquet else "CSV"
        raise ValueError(
            f"cannot read market data {text!r} as {kind}: {type(exc).__name__}: {exc}"
        ) from None
    names = [n for n in header.iloc[0].tolist() if n.strip()] if len(header) else []
    if any("\x00" in n for n in names):
        raise ValueError(f"market data file {text!r} is not a text CSV file (binary data?)")
    repeated = [n for i, n in enumerate(names) if n in names[:i]]
    if repeated:
        raise ValueError(
            f"market data file {text!r} has column {repeated[0]!r} more than once; "
            "give each column a distinct name"
        )
    return frame, text


YFINANCE_FIELDS = {
    "open": "Open",
    "high": "High",
    "low": "Low",
    "close": "Close",
    "volume": "Volume",
}
"""Our fields and the names ``yfinance`` gives them in its header's first row."""


def _is_yfinance(header: pd.DataFrame) -> bool:
    """Whether a CSV's first rows are the header ``yf.download([...]).to_csv()`` writes:
    ``Price,Close,...`` then ``Ticker,AAPL,...`` then ``Date,,...``."""
    if len(header) < 3 or header.shape[1] < 2:
        return False
    first = [str(x).strip() for x in header.iloc[:, 0]]
    return first[:2] == ["Price", "Ticker"] and first[2] in ("Date", "Datetime")


def _from_yfinance(text: str) -> pd.DataFrame:
    """A ``yfinance`` download's CSV (fields over tickers, two header rows) as the long
    format: ``date, tic, open, high, low, close, volume`` (``Adj Close`` is not used:
    ``Close`` is, as for every other source)."""
    wide = pd.read_csv(text, header=[0, 1], index_col=0, skiprows=[2])
    fields = {f for f, _ in wide.columns}
    if "Close" not in fields:
        raise ValueError(f"market data file {text!r} is a yfinance download without a Close column")
    tickers = list(dict.fromkeys(t for _, t in wide.columns))
    parts = []
    for tic in tickers:
        part = pd.DataFrame({"date": wide.index, "tic": tic})
        for ours, theirs in YFINANCE_FIELDS.items():
            if (theirs, tic) in wide.columns:
                part[ours] = wide[(theirs, tic)].to_numpy()
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def _parse_dates(values: pd.Series, label: str) -> pd.Series:
    try:
        parsed = pd.to_datetime(values)
    except (ValueError, TypeError) as exc:
        # Name the offending value: pandas' own message often does not.
        each = pd.to_datetime(values, errors="coerce", format="mixed")
        bad = values[each.isna() & values.notna()]
        shown = f" such as {bad.iloc[0]!r}" if len(bad) else ""
        raise ValueError(f"data {label!r} has dates pandas cannot parse{shown}: {exc}") from None
    if parsed.isna().any():
        raise ValueError(f"data {label!r} has missing dates")
    if getattr(parsed.dt, "tz", None) is not None:
        parsed = parsed.dt.tz_localize(None)
    return parsed.dt.normalize()


def _numeric(wide: pd.DataFrame, field: str, label: str) -> np.ndarray:
    try:
        return wide.to_numpy(dtype=np.float64)
    except (ValueError, TypeError):
        bad = wide.apply(pd.to_numeric, errors="coerce").isna() & wide.notna()
        d, tic = next(iter(bad.stack()[bad.stack()].index))
        raise ValueError(
            f"data {label!r}: {field} of {tic!r} on {pd.Timestamp(d):%Y-%m-%d} is not a "
            f"number: {wide.loc[d, tic]!r}"
        ) from None


def _check_values(data: MarketData) -> None:
    for tic in data.tickers:
        check_name(tic, "ticker", data.source)
    for field in FIELDS:
        arr = getattr(data, field)
        if arr is None:
            continue
        bad = ~np.isfinite(arr)
        what = "NaN or infinite"
        if not bad.any():
            bad = arr < 0 if field == "volume" else arr <= 0
            what = "negative" if field == "volume" else "non-positive"
        if bad.any():
            t, s = np.argwhere(bad)[0]
            value = float(arr[t, s])  # a plain float: numpy 2 reprs as np.float64(...)
            raise ValueError(
                f"data {data.source!r}: {what} {field} {value!r} for {data.tickers[s]!r} "
                f"on {data.dates[t]:%Y-%m-%d} ({int(bad.sum())} such value(s) in all)"
            )
    if data.has_high_low:
        bad = data.high < data.low
        if bad.any():
            t, s = np.argwhere(bad)[0]
            high, low = float(data.high[t, s]), float(data.low[t, s])
            raise ValueError(
                f"data {data.source!r}: high {high!r} < low {low!r} "
                f"for {data.tickers[s]!r} on {data.dates[t]:%Y-%m-%d}"
            )
