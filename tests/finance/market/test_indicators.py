"""Indicators: no look-ahead (prices after a day never move a feature on or before it),
values against plain-loop reference implementations, and the defaults and errors."""

import dataclasses
import functools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from elegantpod.finance.market.indicators import (
    DEFAULT_INDICATORS,
    compute_features,
    parse_indicator,
    resolve_indicators,
    scaled_features,
    turbulence_index,
    warmup_days,
)
from elegantpod.finance.market.prices import MarketData, sp500_sample

RTOL = 1e-10
WIDE_DEFAULT = ("macd", "boll_ub", "boll_lb", "rsi_30", "close_30_sma", "close_60_sma")


@functools.cache
def _sample() -> MarketData:
    return sp500_sample()


@functools.cache
def _sample_features():
    return compute_features(_sample())


@functools.cache
def _turbulence_slice() -> MarketData:
    """About 400 days around the 2008 crash: enough for 253 days of turbulence warm-up."""
    data = _sample().between("2007-06-01", "2008-12-31")
    assert 380 <= data.num_days <= 420
    return data


def _ohlcv(num_days: int = 160, seed: int = 0, flat_days: int = 40) -> MarketData:
    """Random-walk OHLCV for 3 stocks; the last one is flat (high = low = close = 50) for
    its first ``flat_days`` days, which drives RSI, CCI and DX through their 0/0 cases."""
    rng = np.random.default_rng(seed)
    shape = (num_days, 3)
    close = 50.0 * np.exp(np.cumsum(0.02 * rng.standard_normal(shape), axis=0))
    open_ = close * np.exp(0.01 * rng.standard_normal(shape))
    high = np.maximum(open_, close) * (1.0 + 0.02 * rng.random(shape))
    low = np.minimum(open_, close) * (1.0 - 0.02 * rng.random(shape))
    for arr in (close, open_, high, low):
        arr[:flat_days, 2] = 50.0
    volume = rng.integers(1_000, 5_000, size=shape).astype(np.float64)
    return MarketData(
        dates=pd.bdate_range("2015-01-01", periods=num_days),
        tickers=("X", "Y", "FLAT"),
        close=close,
        open=open_,
        high=high,
        low=low,
        volume=volume,
        source="synthetic",
    )


def _perturb_after(data: MarketData, k: int, seed: int, spread: float = 0.3) -> MarketData:
    """The same data up to day ``k``; every price after it multiplied by its own random
    factor (high and low widened to keep ``low <= open, close <= high``)."""
    rng = np.random.default_rng(seed)

    def scaled(arr):
        out = arr.copy()
        out[k + 1 :] *= np.exp(spread * rng.standard_normal(out[k + 1 :].shape))
        return out

    close = scaled(data.close)
    if not data.has_high_low:
        return dataclasses.replace(data, close=close)
    open_ = scaled(data.open)
    high = np.maximum(scaled(data.high), np.maximum(open_, close))
    low = np.minimum(scaled(data.low), np.minimum(open_, close))
    return dataclasses.replace(
        data, close=close, open=open_, high=high, low=low, volume=scaled(data.volume)
    )


def _assert_causal(data: MarketData, k: int, seed: int, indicators=None) -> None:
    before = compute_features(data, indicators)
    after = compute_features(_perturb_after(data, k, seed), indicators)
    assert after.names == before.names
    assert_array_equal(after.values[: k + 1], before.values[: k + 1])
    if before.turbulence is not None:
        assert_array_equal(after.turbulence[: k + 1], before.turbulence[: k + 1])
    # The perturbation is real: features after day k do move (else this test proves nothing).
    if k + 1 >= before.warmup:
        assert not np.array_equal(after.values[k + 1 :], before.values[k + 1 :])
        if before.turbulence is not None:
            assert not np.array_equal(after.turbulence[k + 1 :], before.turbulence[k + 1 :])


# ---------------------------------------------------------------------- no look-ahead
@settings(max_examples=25, deadline=None)
@given(
    k=st.integers(min_value=0, max_value=8313 - 2),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    spread=st.floats(min_value=1e-6, max_value=1.0),
)
def test_no_look_ahead_on_the_sample(k, seed, spread):
    data = _sample()
    before = _sample_features()
    after = compute_features(_perturb_after(data, k, seed, spread))
    assert after.names == WIDE_DEFAULT
    assert_array_equal(after.values[: k + 1], before.values[: k + 1])
    if k + 1 >= before.warmup:
        assert not np.array_equal(after.values[k + 1], before.values[k + 1])


@pytest.mark.parametrize("k", [0, 1, 29, 30, 45, 59, 60, 61, 100, 158])
def test_no_look_ahead_with_high_low(k):
    data = _ohlcv()
    assert resolve_indicators(data) == DEFAULT_INDICATORS
    _assert_causal(data, k, seed=k)
    _assert_causal(data, k, seed=k + 1, indicators=("cci_7", "dx_5", "rsi_3", "close_2_sma"))


@settings(max_examples=25, deadline=None)
@given(
    k=st.integers(min_value=0, max_value=158),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    data_seed=st.integers(min_value=0, max_value=3),
)
def test_no_look_ahead_with_high_low_random(k, seed, data_seed):
    _assert_causal(_ohlcv(seed=data_seed), k, seed)


@pytest.mark.parametrize("k", [100, 252, 253, 254, 300, 350])
def test_no_look_ahead_of_turbulence(k):
    data = _turbulence_slice()
    _assert_causal(data, k, seed=k, indicators=(*WIDE_DEFAULT, "turbulence"))


def test_memory_layout_does_not_change_a_bit():
    """pandas hands over Fortran-ordered arrays; the same prices must give the same bits
    in either layout (MarketData stores row-major, turbulence_index makes sure too)."""
    data = _turbulence_slice()
    assert data.close.flags.c_contiguous
    fortran = np.asfortranarray(data.close)
    assert_array_equal(turbulence_index(fortran), turbulence_index(data.close))
    f_data = dataclasses.replace(data, close=fortran)
    assert f_data.close.flags.c_contiguous
    names = (*WIDE_DEFAULT, "turbulence")
    f, c = compute_features(f_data, names), compute_features(data, names)
    assert_array_equal(f.values, c.values)
    assert_array_equal(f.turbulence, c.turbulence)


# ---------------------------------------------------------------------- plain-loop references
def _ref_sma(x: np.ndarray, n: int) -> np.ndarray:
    out = np.full(x.shape, np.nan)
    for t in range(n - 1, len(x)):
        out[t] = x[t - n + 1 : t + 1].sum(axis=0) / n
    return out


def _ref_ema(x: np.ndarray, span: int) -> np.ndarray:
    alpha = 2.0 / (span + 1.0)
    out = np.empty(x.shape)
    out[0] = x[0]
    for t in range(1, len(x)):
        out[t] = alpha * x[t] + (1.0 - alpha) * out[t - 1]
    return out


def _ref_bollinger(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ub, lb = np.full(x.shape, np.nan), np.full(x.shape, np.nan)
    for t in range(19, len(x)):
        for s in range(x.shape[1]):
            w = x[t - 19 : t + 1, s]
            mean = sum(w) / 20.0
            std = (sum((v - mean) ** 2 for v in w) / 20.0) ** 0.5  # population std
            ub[t, s], lb[t, s] = mean + 2.0 * std, mean - 2.0 * std
    return ub, lb


def _wilder_step(prev: float, value: float, n: int) -> float:
    return prev + (value - prev) / n


def _ref_rsi(x: np.ndarray, n: int) -> np.ndarray:
    out = np.full(x.shape, np.nan)
    for s in range(x.shape[1]):
        avg_gain = avg_loss = 0.0
        for t in range(1, len(x)):
            d = x[t, s] - x[t - 1, s]
            gain, loss = max(d, 0.0), max(-d, 0.0)
            if t == 1:
                avg_gain, avg_loss = gain, loss
            else:
                avg_gain = _wilder_step(avg_gain, gain, n)
                avg_loss = _wilder_step(avg_loss, loss, n)
            if avg_gain == 0.0 and avg_loss == 0.0:
                out[t, s] = 50.0
            elif avg_loss == 0.0:
                out[t, s] = 100.0
            else:
                out[t, s] = 100.0 - 100.0 / (1.0 + avg_gain / avg_loss)
    return out


def _ref_cci(high, low, close, n: int) -> np.ndarray:
    tp = (high + low + close) / 3.0
    out = np.full(tp.shape, np.nan)
    for s in range(tp.shape[1]):
        for t in range(n - 1, len(tp)):
            w = tp[t - n + 1 : t + 1, s]
            mean = w.mean()
            mad = np.abs(w - mean).mean()
            out[t, s] = 0.0 if mad == 0.0 else (tp[t, s] - mean) / (0.015 * mad)
    return out


def _ref_dx(high, low, close, n: int) -> np.ndarray:
    out = np.full(close.shape, np.nan)
    for s in range(close.shape[1]):
        h, l, c = high[:, s], low[:, s], close[:, s]
        for t in range(1, len(c)):
            up, down = h[t] - h[t - 1], l[t - 1] - l[t]
            plus_dm = up if up > down and up > 0 else 0.0
            minus_dm = down if down > up and down > 0 else 0.0
            tr = max(h[t] - l[t], abs(h[t] - c[t - 1]), abs(l[t] - c[t - 1]))
            if t == 1:
                s_plus, s_minus, atr = plus_dm, minus_dm, tr
            else:
                s_plus = _wilder_step(s_plus, plus_dm, n)
                s_minus = _wilder_step(s_minus, minus_dm, n)
                atr = _wilder_step(atr, tr, n)
            if atr == 0.0 or s_plus + s_minus == 0.0:
                out[t, s] = 0.0
            else:
                plus_di, minus_di = 100.0 * s_plus / atr, 100.0 * s_minus / atr
                out[t, s] = 100.0 * abs(plus_di - minus_di) / (plus_di + minus_di)
    return out


def _ref_turbulence(close: np.ndarray, window: int = 252) -> np.ndarray:
    out = np.full(len(close), np.nan)
    returns = np.full(close.shape, np.nan)
    returns[1:] = close[1:] / close[:-1] - 1.0  # returns[t]: day t's return
    for t in range(window + 1, len(close)):
        hist = returns[t - window : t]
        mean = hist.mean(axis=0)
        centred = hist - mean
        cov = centred.T @ centred / (window - 1)
        d = returns[t] - mean
        out[t] = d @ np.linalg.pinv(cov) @ d
    return out


def _feature(data: MarketData, name: str) -> tuple[np.ndarray, int]:
    f = compute_features(data, [name])
    assert f.names == (name,)
    return f.values[..., 0], f.warmup


def _check(actual: np.ndarray, warmup: int, expected: np.ndarray, rtol=RTOL, atol=0.0):
    assert np.isnan(actual[:warmup]).all()
    assert np.isfinite(actual[warmup:]).all()
    assert_allclose(actual[warmup:], expected[warmup:], rtol=rtol, atol=atol)


@pytest.mark.parametrize("n", [2, 5, 30, 60])
def test_sma(n):
    data = _ohlcv()
    _check(*_feature(data, f"close_{n}_sma"), _ref_sma(data.close, n))


def test_bollinger():
    data = _ohlcv()
    ub, lb = _ref_bollinger(data.close)
    _check(*_feature(data, "boll_ub"), ub)
    _check(*_feature(data, "boll_lb"), lb)
    # On the flat stretch the band has zero width.
    values, _ = _feature(data, "boll_ub")
    assert_array_equal(values[20:40, 2], 50.0)


def test_macd():
    data = _ohlcv()
    expected = _ref_ema(data.close, 12) - _ref_ema(data.close, 26)
    # Differences of nearly equal EMAs: absolute slack relative to the price level (~50).
    _check(*_feature(data, "macd"), expected, atol=1e-11)


@pytest.mark.parametrize("n", [2, 14, 30])
def test_rsi(n):
    data = _ohlcv()
    values, warmup = _feature(data, f"rsi_{n}")
    expected = _ref_rsi(data.close, n)
    _check(values, warmup, expected)
    assert ((values[warmup:] >= 0) & (values[warmup:] <= 100)).all()
    assert_array_equal(values[warmup:40, 2], 50.0)  # nothing moved yet


def test_rsi_of_a_steady_rise_is_100():
    close = np.linspace(10.0, 20.0, 160)[:, None].repeat(3, axis=1)
    data = MarketData(dates=_ohlcv().dates, tickers=("A", "B", "C"), close=close)
    values, warmup = _feature(data, "rsi_14")
    assert_array_equal(values[warmup:], 100.0)


@pytest.mark.parametrize("n", [5, 30])
def test_cci(n):
    data = _ohlcv()
    values, warmup = _feature(data, f"cci_{n}")
    _check(values, warmup, _ref_cci(data.high, data.low, data.close, n), rtol=1e-9)
    assert_array_equal(values[warmup:40, 2], 0.0)  # zero mean deviation: 0, not inf


@pytest.mark.parametrize("n", [5, 30])
def test_dx(n):
    data = _ohlcv()
    values, warmup = _feature(data, f"dx_{n}")
    _check(values, warmup, _ref_dx(data.high, data.low, data.close, n))
    assert ((values[warmup:] >= 0) & (values[warmup:] <= 100)).all()
    assert_array_equal(values[warmup:40, 2], 0.0)


def test_turbulence():
    data = _sample().select(["AAPL", "JPM", "XOM", "KO"]).between("2007-01-01", "2008-06-30")
    expected = _ref_turbulence(data.close)
    assert_allclose(turbulence_index(data.close)[253:], expected[253:], rtol=1e-9)
    f = compute_features(data, ["turbulence"])
    assert f.names == () and f.values.shape == (data.num_days, 4, 0)
    assert f.warmup == 253
    _check(f.turbulence, 253, expected, rtol=1e-9)
    assert (f.turbulence[253:] >= 0).all()


def test_turbulence_with_collinear_stocks():
    """The pseudo-inverse ignores a duplicated stock: the distance is unchanged."""
    data = _turbulence_slice().select(["MSFT", "PG", "CVX"])
    dup = np.concatenate([data.close, data.close[:, :1]], axis=1)  # MSFT twice
    assert_allclose(turbulence_index(dup)[253:], turbulence_index(data.close)[253:], rtol=1e-6)


# ---------------------------------------------------------------------- defaults and errors
def test_wide_data_drops_cci_and_dx():
    data = _sample()
    assert resolve_indicators(data) == WIDE_DEFAULT
    f = _sample_features()
    assert f.names == WIDE_DEFAULT
    assert f.values.shape == (data.num_days, data.num_stocks, len(WIDE_DEFAULT))
    assert f.values.dtype == np.float64 and f.turbulence is None
    assert compute_features(_ohlcv()).names == DEFAULT_INDICATORS


@pytest.mark.parametrize("name", ["cci_30", "dx_14"])
def test_high_low_indicator_on_wide_data(name):
    with pytest.raises(ValueError, match=f"indicator '{name}' needs high and low"):
        compute_features(_sample(), ["macd", name])


@pytest.mark.parametrize("name", ["foo", "rsi", "macd_12", "close_sma", "sma_30", "RSI_30"])
def test_unknown_indicator(name):
    with pytest.raises(ValueError, match=f"unknown indicator '{name}'"):
        compute_features(_ohlcv(), ["macd", name])


@pytest.mark.parametrize("name", ["rsi_1", "close_1_sma", "cci_0"])
def test_window_too_small(name):
    with pytest.raises(ValueError, match=f"'{name}' needs a window of at least 2 days"):
        compute_features(_ohlcv(), [name])


def test_repeated_indicators():
    with pytest.raises(ValueError, match=r"indicators repeat: \['macd', 'rsi_30', 'macd'\]"):
        compute_features(_ohlcv(), ["macd", "rsi_30", "macd"])


@pytest.mark.parametrize(
    ("indicators", "days"),
    [(None, 60), (["rsi_14"], 14), (["turbulence"], 253), (["macd"], 10)],
)
def test_too_short(indicators, days):
    data = _sample().between("2001-01-01", None)
    with pytest.raises(ValueError, match=f"has {days} days, too few"):
        compute_features(data.between(None, data.dates[days - 1]), indicators)


def test_just_long_enough():
    data = _sample().between("2001-01-01", "2001-03-29")
    assert data.num_days == 61
    f = compute_features(data)
    assert f.warmup == 60 and np.isfinite(f.values[60]).all()


def test_parse_indicator():
    assert parse_indicator("rsi_30") == ("rsi", 30)
    assert parse_indicator("close_5_sma") == ("sma", 5)
    assert parse_indicator("macd") == ("macd", 26)
    assert parse_indicator("turbulence") == ("turbulence", 253)


@pytest.mark.parametrize(
    ("indicators", "warmup"),
    [
        (None, 60),
        (["macd"], 26),
        (["boll_lb"], 20),
        (["rsi_14"], 14),
        (["rsi_2"], 2),
        (["close_5_sma", "cci_45", "dx_14"], 45),
        (["rsi_30", "turbulence"], 253),
        ([], 2),  # no features: still one day of history before the first return
    ],
)
def test_warmup_is_the_longest_window(indicators, warmup):
    data = _ohlcv(num_days=300)
    names = resolve_indicators(data, indicators)
    assert max(warmup_days(names), 2) == warmup
    f = compute_features(data, indicators)
    assert f.warmup == warmup
    assert np.isnan(f.values[:warmup]).all()
    assert np.isfinite(f.values[warmup:]).all()
    if f.turbulence is not None:
        assert np.isnan(f.turbulence[:warmup]).all()
        assert np.isfinite(f.turbulence[warmup:]).all()


def _check_scaled(data: MarketData, indicators=None) -> np.ndarray:
    f = compute_features(data, indicators)
    scaled = scaled_features(f, data.close)
    width = len(f.names) + (f.turbulence is not None)
    assert scaled.shape == (data.num_days, data.num_stocks, width)
    assert scaled.dtype == np.float32
    after = scaled[f.warmup :]
    assert np.isfinite(after).all()
    assert (np.abs(after) <= 5.0).all()
    return scaled


def test_scaled_features():
    scaled = _check_scaled(_sample())
    # Not degenerate: every feature varies, and most values sit well inside the clip.
    after = scaled[60:]
    assert (after.std(axis=(0, 1)) > 0.01).all()
    assert (np.abs(after) < 5.0).mean() > 0.99
    _check_scaled(_ohlcv())
    scaled = _check_scaled(_turbulence_slice(), (*WIDE_DEFAULT, "turbulence"))
    turb = scaled[253:, :, -1]
    assert (turb >= 0).all() and (turb == turb[:, :1]).all()  # one value per day


def test_scaled_features_of_nothing():
    data = _ohlcv()
    scaled = scaled_features(compute_features(data, []), data.close)
    assert scaled.shape == (data.num_days, 3, 0) and scaled.dtype == np.float32
