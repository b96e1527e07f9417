"""Technical indicators computed from past data only, and their scaled form for agents.

Every indicator on day ``t`` uses prices of days ``<= t`` (trailing rolling windows and
exponential averages that run forward in time), so features never peek at the future:
``tests/finance/market/test_indicators.py`` changes all prices after a day and checks that no
feature on or before that day moves. The names follow FinRL's defaults (stockstats
naming) so that FinRL users recognise them: ``macd``, ``boll_ub``, ``boll_lb``,
``rsi_30``, ``cci_30``, ``dx_30``, ``close_30_sma``, ``close_60_sma``, and the optional
``turbulence`` index (one value per day, shared by all stocks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from elegantpod.finance.market.prices import MarketData

DEFAULT_INDICATORS = (
    "macd",
    "boll_ub",
    "boll_lb",
    "rsi_30",
    "cci_30",
    "dx_30",
    "close_30_sma",
    "close_60_sma",
)
"""FinRL's default list; ``cci`` and ``dx`` are dropped by default when the data has no
high/low (a wide table of closes)."""
NEEDS_HIGH_LOW = ("cci", "dx")
TURBULENCE_WINDOW = 252
_PATTERN = re.compile(
    r"^(?:(?P<plain>macd|boll_ub|boll_lb|turbulence)|(?P<kind>rsi|cci|dx)_(?P<n>\d+)|"
    r"close_(?P<sma>\d+)_sma)$"
)


@dataclass(frozen=True, eq=False)
class Features:
    """Indicator values: ``values[t, s, k]`` is indicator ``names[k]`` of stock ``s`` on day
    ``t``; ``turbulence`` (if asked for) is per day. Rows before ``warmup`` are NaN."""

    names: tuple[str, ...]
    values: np.ndarray
    """``(num_days, num_stocks, len(names))`` float64, raw units."""
    turbulence: np.ndarray | None
    """``(num_days,)`` float64 or ``None``."""
    warmup: int
    """First day index on which every feature is defined."""


def parse_indicator(name: str) -> tuple[str, int]:
    """``"rsi_30" -> ("rsi", 30)``; ``ValueError`` naming an unknown indicator."""
    m = _PATTERN.match(str(name))
    if m is None:
        raise ValueError(
            f"unknown indicator {name!r}; known: macd, boll_ub, boll_lb, rsi_N, cci_N, dx_N, "
            "close_N_sma, turbulence (N a window in days)"
        )
    if m["plain"]:
        window = {"macd": 26, "boll_ub": 20, "boll_lb": 20, "turbulence": TURBULENCE_WINDOW + 1}
        return m["plain"], window[m["plain"]]
    kind, n = (m["kind"], int(m["n"])) if m["kind"] else ("sma", int(m["sma"]))
    if n < 2:
        raise ValueError(f"indicator {name!r} needs a window of at least 2 days")
    return kind, n


def resolve_indicators(data: MarketData, indicators=None) -> tuple[str, ...]:
    """The indicator list to use on ``data``: the default adapted to it, or the one asked for.

    Raises ``ValueError`` for an unknown name or one that needs high/low the data lacks.
    """
    if indicators is None:
        names = tuple(
            n
            for n in DEFAULT_INDICATORS
            if data.has_high_low or parse_indicator(n)[0] not in NEEDS_HIGH_LOW
        )
    else:
        names = tuple(str(n) for n in indicators)
    if len(set(names)) != len(names):
        raise ValueError(f"indicators repeat: {list(names)}")
    for n in names:
        kind, _ = parse_indicator(n)
        if kind in NEEDS_HIGH_LOW and not data.has_high_low:
            raise ValueError(
                f"indicator {n!r} needs high and low prices, which data {data.source!r} lacks "
                "(a wide table of closes); drop it or load FinRL long-format data"
            )
    return names


def warmup_days(names) -> int:
    """Days of history the indicators need before their first defined value."""
    return max((parse_indicator(n)[1] for n in names), default=1)


def compute_features(data: MarketData, indicators=None) -> Features:
    """Compute the indicators on ``data`` (all of it: later slicing keeps them causal).

    Raises
    ------
    ValueError
        For unknown indicators, missing high/low, or data shorter than the longest
        window plus one day to trade on.
    """
    names = resolve_indicators(data, indicators)
    warmup = max(warmup_days(names), 2)  # day 0 has no return yet
    if data.num_days <= warmup:
        raise ValueError(
            f"data {data.source!r} has {data.num_days} days, too few for the indicators' "
            f"windows ({warmup} days of history, plus days to trade on)"
        )
    close = pd.DataFrame(data.close)
    per_stock, turbulence = [], None
    for n in names:
        kind, window = parse_indicator(n)
        if kind == "turbulence":
            turbulence = turbulence_index(data.close)
            continue
        per_stock.append(_indicator(kind, window, n, close, data))
    values = (
        np.stack(per_stock, axis=-1)
        if per_stock
        else np.zeros((data.num_days, data.num_stocks, 0), dtype=np.float64)
    )
    values[:warmup] = np.nan
    if turbulence is not None:
        turbulence[:warmup] = np.nan
    return Features(
        names=tuple(n for n in names if n != "turbulence"),
        values=values,
        turbulence=turbulence,
        warmup=warmup,
    )


def _indicator(kind: str, window: int, name: str, close: pd.DataFrame, data) -> np.ndarray:
    if kind == "macd":
        return (_ema(close, 12) - _ema(close, 26)).to_numpy()
    if kind in ("boll_ub", "boll_lb"):
        mid = close.rolling(20).mean()
        band = 2.0 * close.rolling(20).std(ddof=0)
        return (mid + band if kind == "boll_ub" else mid - band).to_numpy()
    if kind == "sma":
        return close.rolling(window).mean().to_numpy()
    if kind == "rsi":
        return rsi(close, window)
    high, low = pd.DataFrame(data.high), pd.DataFrame(data.low)
    if kind == "cci":
        return cci(high, low, close, window)
    if kind == "dx":
        return dx(high, low, close, window)
    raise AssertionError(name)


def _ema(x: pd.DataFrame, span: int) -> pd.DataFrame:
    return x.ewm(span=span, adjust=False).mean()


def _wilder(x: pd.DataFrame, window: int) -> pd.DataFrame:
    """Wilder's smoothing: an exponential average with ``alpha = 1 / window``."""
    return x.ewm(alpha=1.0 / window, adjust=False).mean()


def rsi(close: pd.DataFrame, window: int) -> np.ndarray:
    """Relative strength index (Wilder), 0..100; 50 where nothing moved."""
    delta = close.diff()
    gain = _wilder(delta.clip(lower=0.0), window)
    loss = _wilder((-delta).clip(lower=0.0), window)
    total = gain + loss
    out = 100.0 * gain / total.where(total > 0)
    return out.fillna(50.0).where(delta.notna()).to_numpy()


def cci(high: pd.DataFrame, low: pd.DataFrame, close: pd.DataFrame, window: int) -> np.ndarray:
    """Commodity channel index: typical price's distance from its mean, in mean deviations."""
    tp = (high + low + close) / 3.0
    arr = tp.to_numpy()
    out = np.full(arr.shape, np.nan)
    if len(arr) >= window:
        win = np.lib.stride_tricks.sliding_window_view(arr, window, axis=0)  # (T-w+1, S, w)
        mean = win.mean(axis=-1)
        mad = np.abs(win - mean[..., None]).mean(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            val = (arr[window - 1 :] - mean) / (0.015 * mad)
        out[window - 1 :] = np.where(mad > 0, val, 0.0)
    return out


def dx(high: pd.DataFrame, low: pd.DataFrame, close: pd.DataFrame, window: int) -> np.ndarray:
    """Directional movement index (Wilder), 0..100: how one-sided recent moves were."""
    up = high.diff()
    down = -low.diff()
    plus_dm = up.where((up > down) & (up > 0), 0.0)
    minus_dm = down.where((down > up) & (down > 0), 0.0)
    prev = close.shift(1)
    tr = np.maximum(high - low, np.maximum((high - prev).abs(), (low - prev).abs()))
    tr = tr.where(prev.notna())
    atr = _wilder(tr, window)
    plus_di = _wilder(plus_dm.where(prev.notna()), window) / atr.where(atr > 0)
    minus_di = _wilder(minus_dm.where(prev.notna()), window) / atr.where(atr > 0)
    total = plus_di + minus_di
    out = 100.0 * (plus_di - minus_di).abs() / total.where(total > 0)
    return out.fillna(0.0).where(prev.notna()).to_numpy()


def turbulence_index(close: np.ndarray, window: int = TURBULENCE_WINDOW) -> np.ndarray:
    """Mahalanobis distance of each day's returns from the previous ``window`` days'.

    Day ``t`` uses returns of days ``t - window .. t - 1`` for the mean and covariance
    (pseudo-inverse, so collinear stocks are fine) and day ``t``'s own return: a market
    stress signal that FinRL uses to stop trading in crashes.
    """
    # C order: numpy's reductions over rows of a Fortran-ordered array (what pandas'
    # to_numpy returns) add in a different order, so the same prices would give
    # results differing in the last bits depending on the layout they arrive in.
    close = np.ascontiguousarray(close, dtype=np.float64)
    returns = close[1:] / close[:-1] - 1.0
    out = np.full(len(close), np.nan)
    for t in range(window, len(returns)):
        hist = returns[t - window : t]
        mu = hist.mean(axis=0)
        cov = np.cov(hist, rowvar=False)
        d = returns[t] - mu
        out[t + 1] = float(d @ np.linalg.pinv(np.atleast_2d(cov)) @ d)
    return out


def scaled_features(features: Features, close: np.ndarray) -> np.ndarray:
    """Unit-free features for agents, ``(num_days, num_stocks, F)`` float32.

    Price-level indicators become relative distances to the close (so a $2 and a $300
    stock look alike), oscillators are centred and scaled to about [-1, 1], and the
    turbulence index is log-compressed. Values are clipped to [-5, 5]: early, thinly
    priced days of long histories otherwise produce outliers that dominate a network's
    input.
    """
    cols = []
    for k, n in enumerate(features.names):
        v = features.values[..., k]
        kind, _ = parse_indicator(n)
        if kind == "macd":
            cols.append(v / close * 10.0)
        elif kind in ("boll_ub", "boll_lb", "sma"):
            cols.append((v / close - 1.0) * 10.0)
        elif kind == "rsi":
            cols.append(v / 50.0 - 1.0)
        elif kind == "cci":
            cols.append(np.tanh(v / 200.0))
        elif kind == "dx":
            cols.append(v / 50.0 - 1.0)
    if features.turbulence is not None:
        turb = np.log1p(np.maximum(features.turbulence, 0.0)) / 4.0
        cols.append(np.broadcast_to(turb[:, None], close.shape))
    if not cols:
        return np.zeros((*close.shape, 0), dtype=np.float32)
    return np.clip(np.stack(cols, axis=-1), -5.0, 5.0).astype(np.float32)
