"""Market data: the shipped sample, round trips through every format, and each validation
error, which must name the ticker, date or column that is wrong."""

import datetime as dt
import re
import sys

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_array_equal

from elegantpod.finance.market.prices import (
    FIELDS,
    MarketData,
    load,
    load_long,
    load_wide,
    sp500_index,
    sp500_sample,
)
from elegantpod.finance.market.splits import DateSplits

TICKERS = ("AAA", "BBB", "CCC")
DATES = pd.bdate_range("2021-03-01", periods=10)  # Mon 2021-03-01 .. Fri 2021-03-12


def _long_frame(num_days: int = 10, tickers=TICKERS) -> pd.DataFrame:
    """FinRL long format, sorted by date then ticker, with distinct deterministic prices."""
    rows = []
    for t, day in enumerate(DATES[:num_days]):
        for s, tic in enumerate(tickers):
            close = 10.0 * (s + 1) + 0.25 * t + 0.01 * s * t
            rows.append(
                {
                    "date": f"{day:%Y-%m-%d}",
                    "tic": tic,
                    "open": close - 0.1,
                    "high": close + 0.5,
                    "low": close - 0.5,
                    "close": close,
                    "volume": 1000.0 * (s + 1) + t,
                }
            )
    return pd.DataFrame(rows)


def _wide_frame(num_days: int = 10) -> pd.DataFrame:
    long = _long_frame(num_days)
    wide = long.pivot(index="date", columns="tic", values="close")[list(TICKERS)]
    return wide.reset_index().rename_axis(columns=None)


def _row(frame: pd.DataFrame, day: int, tic: str) -> int:
    """Index of the row of ``tic`` on ``DATES[day]``."""
    hit = frame.index[(frame["date"] == f"{DATES[day]:%Y-%m-%d}") & (frame["tic"] == tic)]
    assert len(hit) == 1
    return int(hit[0])


def _raises(match_all, fn, *args, **kwargs) -> str:
    """Call ``fn`` expecting a ValueError whose message contains every string in ``match_all``."""
    with pytest.raises(ValueError) as info:
        fn(*args, **kwargs)
    msg = str(info.value)
    for part in match_all:
        assert part in msg, f"{part!r} not in {msg!r}"
    return msg


def _assert_same(a: MarketData, b: MarketData, fields=FIELDS, rtol: float = 0.0) -> None:
    assert a.tickers == b.tickers
    assert_array_equal(a.dates.values, b.dates.values)
    for f in fields:
        x, y = getattr(a, f), getattr(b, f)
        assert (x is None) == (y is None), f
        if x is not None:
            if rtol:
                np.testing.assert_allclose(x, y, rtol=rtol, atol=0)
            else:
                assert_array_equal(x, y)


# ---------------------------------------------------------------------- the sample
@pytest.fixture(scope="module")
def sample() -> MarketData:
    return sp500_sample()


def test_sample_shape_dates_and_prices(sample):
    assert sample.num_stocks == 20 and len(set(sample.tickers)) == 20
    assert sample.num_days == 8313
    assert sample.dates[0] == pd.Timestamp("1990-01-02")
    assert sample.dates[-1] == pd.Timestamp("2022-12-28")
    assert sample.dates.is_monotonic_increasing and not sample.dates.has_duplicates
    assert sample.close.shape == (8313, 20) and sample.close.dtype == np.float64
    assert np.isfinite(sample.close).all() and (sample.close > 0).all()
    assert not sample.has_high_low and sample.volume is None
    assert sample.source == "sp500"


def test_sample_index_covers_the_same_dates(sample):
    index = sp500_index()
    assert index.index.equals(sample.dates)
    assert np.isfinite(index.to_numpy()).all() and (index.to_numpy() > 0).all()


def test_load_sample_by_name(sample):
    _assert_same(load("sp500"), sample)
    assert load(sample) is sample


def _slice(sample: MarketData) -> MarketData:
    return sample.select(["MSFT", "AAPL", "KO"]).between("2008-09-01", "2008-10-31")


def test_long_round_trip(sample):
    part = _slice(sample)
    assert (
        part.tickers == ("MSFT", "AAPL", "KO") and part.num_days == 44
    )  # 2008-09-01 was Labor Day
    long = part.to_long()
    assert list(long.columns) == ["date", "tic", "close"]
    assert len(long) == part.num_days * part.num_stocks
    _assert_same(load_long(long), part)
    _assert_same(load(long), part)


def test_wide_round_trip(sample):
    part = _slice(sample)
    _assert_same(load_wide(part.closes()), part)
    _assert_same(load(part.closes()), part)


def test_long_round_trip_keeps_ohlcv():
    data = load_long(_long_frame())
    assert data.tickers == TICKERS and data.num_days == 10 and data.has_high_low
    _assert_same(load_long(data.to_long()), data)
    # Rows grouped by ticker, tickers in reverse order: the tickers keep that order.
    shuffled = data.to_long().sort_values(["tic", "date"], ascending=[False, True])
    _assert_same(load_long(shuffled).select(TICKERS), data)


def test_csv_round_trips(sample, tmp_path):
    part = _slice(sample)
    long_path = tmp_path / "long.csv"
    part.to_long().to_csv(long_path, index=False)
    from_long = load(long_path)
    _assert_same(from_long, part, rtol=1e-15)
    assert from_long.source == str(long_path)

    wide_path = tmp_path / "wide.csv.gz"
    part.closes().rename_axis("Date").to_csv(wide_path)
    _assert_same(load(wide_path), part, rtol=1e-15)

    # No date header: the first column holds the dates.
    part.closes().to_csv(tmp_path / "plain.csv")
    _assert_same(load(tmp_path / "plain.csv"), part, rtol=1e-15)

    ohlcv = load_long(_long_frame())
    ohlcv.to_long().to_csv(tmp_path / "ohlcv.csv", index=False)
    _assert_same(load(tmp_path / "ohlcv.csv"), ohlcv, rtol=1e-15)


def test_wide_date_column_by_name(tmp_path):
    frame = _wide_frame()
    frame = frame.rename(columns={"date": "day"})[["AAA", "day", "BBB", "CCC"]]
    data = load_wide(frame, date_column="day")
    assert data.tickers == TICKERS
    assert_array_equal(data.dates.values, DATES.values)
    frame.to_csv(tmp_path / "w.csv", index=False)
    _assert_same(load(tmp_path / "w.csv", date_column="day"), data)
    _raises(["'when'"], load_wide, frame, date_column="when")


def test_parquet_round_trip(sample, tmp_path):
    pytest.importorskip("pyarrow")
    part = _slice(sample)
    part.to_long().to_parquet(tmp_path / "long.parquet")
    _assert_same(load(tmp_path / "long.parquet"), part)
    part.closes().to_parquet(tmp_path / "wide.parquet")
    _assert_same(load(tmp_path / "wide.parquet"), part)


# ---------------------------------------------------------------------- locate, between, select
def test_locate_is_inclusive_and_open_ended():
    data = load_long(_long_frame())
    assert data.locate() == (0, 10)
    assert data.locate(DATES[2], DATES[5]) == (2, 6)
    # A weekend start snaps forward, a weekend end back: Sat 03-06 .. Sun 03-07 is empty.
    _raises(["'2021-03-06'", "'2021-03-07'"], data.locate, "2021-03-06", "2021-03-07")
    assert data.locate("2021-03-06", None) == (5, 10)
    assert data.locate(None, "2021-03-07") == (0, 5)
    part = data.between("2021-03-03", "2021-03-09")
    assert_array_equal(part.dates.values, DATES[2:7].values)
    assert_array_equal(part.high, data.high[2:7])
    assert part.tickers == data.tickers


@pytest.mark.parametrize(
    ("start", "end"),
    [
        ("1980-01-01", "1985-12-31"),  # before the data
        ("2030-01-01", None),  # after it
        (None, "2000-01-01"),
        ("2021-03-09", "2021-03-03"),  # end before start
    ],
)
def test_range_outside_the_data(start, end):
    data = load_long(_long_frame())
    msg = _raises([repr(start), repr(end), "2021-03-01", "2021-03-12"], data.between, start, end)
    assert msg.startswith("no trading days")


@pytest.mark.parametrize("bad", ["not-a-date", "2021-13-45", ""])
def test_bad_date_strings(bad):
    data = load_long(_long_frame())
    _raises([f"start {bad!r}"], data.locate, bad, None)
    _raises([f"end {bad!r}"], data.between, None, bad)


def test_select_orders_and_rejects():
    data = load_long(_long_frame())
    part = data.select(["CCC", "AAA"])
    assert part.tickers == ("CCC", "AAA")
    for f in FIELDS:
        assert_array_equal(getattr(part, f), getattr(data, f)[:, [2, 0]])
    _raises(["'ZZZ'"], data.select, ["AAA", "ZZZ"])
    _raises(["repeat", "['AAA', 'BBB', 'AAA']"], data.select, ["AAA", "BBB", "AAA"])


def test_shape_mismatch():
    with pytest.raises(ValueError, match=re.escape("high has shape (10, 2), expected (10, 3)")):
        MarketData(
            dates=DATES,
            tickers=TICKERS,
            close=np.ones((10, 3)),
            high=np.ones((10, 2)),
            low=np.ones((10, 2)),
        )


# ---------------------------------------------------------------------- validation: long format
@pytest.mark.parametrize("column", ["date", "tic", "close"])
def test_missing_column(column):
    frame = _long_frame().drop(columns=[column])
    _raises([f"['{column}']", "lacks"], load_long, frame)


def test_column_names_are_case_and_space_insensitive():
    frame = _long_frame().rename(columns={"date": " Date", "tic": "TIC", "close": "Close "})
    _assert_same(load_long(frame), load_long(_long_frame()))


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_nan_or_infinite_close(value):
    frame = _long_frame()
    frame.loc[_row(frame, 4, "BBB"), "close"] = value
    _raises(["NaN or infinite close", "'BBB'", "2021-03-05", "1 such value"], load_long, frame)


@pytest.mark.parametrize("field", ["open", "high", "low", "close"])
@pytest.mark.parametrize("value", [0.0, -3.5])
def test_non_positive_price(field, value):
    frame = _long_frame()
    frame.loc[_row(frame, 7, "CCC"), field] = value
    if field == "high":  # keep high >= low so the price check is the one that fires
        frame.loc[_row(frame, 7, "CCC"), "low"] = value - 1.0
    _raises([f"non-positive {field} {value!r}", "'CCC'", "2021-03-10"], load_long, frame)


def test_negative_volume():
    frame = _long_frame()
    frame.loc[_row(frame, 2, "AAA"), "volume"] = -5.0
    _raises(["negative volume -5.0", "'AAA'", "2021-03-03"], load_long, frame)
    frame.loc[_row(frame, 2, "AAA"), "volume"] = 0.0  # no trades that day: fine
    assert load_long(frame).volume[2, 0] == 0.0


def test_duplicate_rows():
    frame = _long_frame()
    frame = pd.concat([frame, frame.iloc[[_row(frame, 3, "BBB")]]], ignore_index=True)
    _raises(["duplicate (date, tic)", "(2021-03-04, 'BBB')"], load_long, frame)


def test_rows_in_any_order_load_as_the_sorted_rows():
    """Each (date, tic) is unique, so the row order carries nothing: rows are sorted."""
    frame = _long_frame()
    sorted_data = load_long(frame)
    i, j = _row(frame, 5, "CCC"), _row(frame, 6, "CCC")
    swapped = frame.iloc[[*range(i), j, *range(i + 1, j), i, *range(j + 1, len(frame))]]
    _assert_same(load_long(swapped), sorted_data)
    _assert_same(load_long(frame.iloc[::-1]).select(TICKERS), sorted_data)  # dates descending
    shuffled = frame.sample(frac=1.0, random_state=0)
    data = load_long(shuffled)
    # tickers keep the order of their first row; the arrays are the sorted data's
    assert data.tickers == tuple(pd.unique(shuffled["tic"]))
    _assert_same(data.select(TICKERS), sorted_data)


def test_a_duplicate_in_shuffled_rows_is_refused_naming_it():
    frame = _long_frame()
    twin = frame.iloc[[_row(frame, 7, "AAA")]].assign(close=99.0)  # same day, other price
    frame = pd.concat([frame, twin], ignore_index=True).sample(frac=1.0, random_state=1)
    msg = _raises(["duplicate (date, tic)", "(2021-03-10, 'AAA')"], load_long, frame)
    assert msg.count("(2021-") == 1, msg  # only the pair that repeats


def test_ticker_lacking_a_day():
    frame = _long_frame()
    frame = frame.drop(index=_row(frame, 6, "AAA"))
    _raises(["'AAA' lacks 2021-03-09", "1 ticker(s)"], load_long, frame)
    frame = _long_frame()
    frame = frame[~((frame["tic"] == "BBB") & frame["date"].isin(["2021-03-02", "2021-03-11"]))]
    _raises(["'BBB' lacks 2021-03-02 and 1 more day"], load_long, frame)


def test_high_below_low():
    frame = _long_frame()
    i = _row(frame, 8, "BBB")
    frame.loc[i, "high"] = 21.5
    frame.loc[i, "low"] = 21.75
    _raises(["high 21.5 < low 21.75 for 'BBB' on 2021-03-11"], load_long, frame)


def test_non_numeric_price():
    frame = _long_frame()
    frame["close"] = frame["close"].astype(object)
    frame.loc[_row(frame, 1, "CCC"), "close"] = "12,5"
    _raises(["close of 'CCC' on 2021-03-02", "'12,5'"], load_long, frame)
    # Numbers written as text are read as numbers.
    frame.loc[_row(frame, 1, "CCC"), "close"] = "12.5"
    assert load_long(frame).close[1, 2] == 12.5


@pytest.mark.parametrize("bad", ["someday", "2021-02-30"])
def test_unparsable_dates(bad):
    frame = _long_frame()
    frame.loc[_row(frame, 3, "AAA"), "date"] = bad
    _raises(["cannot parse", f"such as {bad!r}"], load_long, frame)


def test_missing_dates():
    frame = _long_frame()
    frame.loc[_row(frame, 3, "AAA"), "date"] = None
    _raises(["missing dates"], load_long, frame)


def test_empty_frames():
    _raises(["no rows"], load_long, _long_frame().iloc[:0])
    _raises(["no ticker columns or no rows"], load_wide, _wide_frame().iloc[:0])
    _raises(["no ticker columns or no rows"], load_wide, _wide_frame()[["date"]])
    _raises(["no columns"], load_wide, pd.DataFrame())
    _raises(["no columns"], load, pd.DataFrame())


# ---------------------------------------------------------------------- validation: wide format
def test_wide_loads():
    data = load_wide(_wide_frame())
    assert data.tickers == TICKERS
    _assert_same(data, load_long(_long_frame()), fields=("close",))


def test_wide_duplicate_dates():
    frame = _wide_frame()
    frame.loc[4, "date"] = frame.loc[3, "date"]
    _raises(["duplicate date 2021-03-04"], load_wide, frame)


def test_wide_unsorted_dates_are_sorted():
    frame = _wide_frame()
    _assert_same(load_wide(frame.iloc[[0, 1, 2, 4, 3, 5, 6, 7, 8, 9]]), load_wide(frame))
    _assert_same(load_wide(frame.iloc[::-1]), load_wide(frame))
    indexed = frame.set_index(pd.DatetimeIndex(frame["date"])).drop(columns="date")
    _assert_same(load_wide(indexed.iloc[::-1]), load_wide(frame))  # a DataFrame's index too


def _sample_csv_lines() -> tuple[str, list[str]]:
    """The shipped sample CSV as text: its header and its data lines, in file order."""
    import gzip
    import importlib.resources

    path = importlib.resources.files("elegantpod.finance.market") / "data" / "sp500_closes.csv.gz"
    header, *lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    return header, lines


def test_a_shuffled_copy_of_the_sample_csv_loads_exactly_as_the_sample(sample, tmp_path):
    header, lines = _sample_csv_lines()
    order = np.random.default_rng(0).permutation(len(lines))
    assert (order != np.arange(len(lines))).sum() > len(lines) // 2  # really shuffled
    path = tmp_path / "shuffled.csv"
    path.write_text("\n".join([header, *(lines[k] for k in order)]) + "\n")
    loaded = load(path)
    _assert_same(loaded, sample)  # the same text parsed alike: bit for bit
    assert loaded.dates.is_monotonic_increasing and loaded.source == str(path)


def test_a_duplicate_date_in_a_shuffled_sample_csv_is_refused_naming_it(tmp_path):
    header, lines = _sample_csv_lines()
    day = next(line for line in lines if line.startswith("2008-09-15,"))
    moved = day.split(",", 2)
    twin = ",".join([moved[0], "1.5", moved[2]])  # the same day with another AAPL close
    order = np.random.default_rng(1).permutation(len(lines))
    shuffled = [lines[k] for k in order]
    shuffled.insert(len(shuffled) // 2, twin)
    path = tmp_path / "twice.csv"
    path.write_text("\n".join([header, *shuffled]) + "\n")
    _raises([str(path), "duplicate date 2008-09-15"], load, path)


def test_wide_repeated_tickers():
    frame = _wide_frame()
    frame.columns = ["date", "AAA", "BBB", "AAA"]
    _raises(["repeats ticker columns", "['AAA', 'BBB', 'AAA']"], load_wide, frame)


def test_wide_nan_and_text():
    frame = _wide_frame()
    frame.loc[6, "BBB"] = np.nan
    _raises(["NaN", "'BBB'", "2021-03-09"], load_wide, frame)
    frame = _wide_frame()
    frame["CCC"] = frame["CCC"].astype(object)
    frame.loc[2, "CCC"] = "n/a"
    _raises(["close of 'CCC' on 2021-03-03", "'n/a'"], load_wide, frame)


def test_wide_unparsable_dates():
    frame = _wide_frame()
    frame.loc[5, "date"] = "tomorrow-ish"
    _raises(["cannot parse", "such as 'tomorrow-ish'"], load_wide, frame)


def test_missing_file(tmp_path):
    path = tmp_path / "nope.csv"
    for fn in (load, load_long, load_wide):
        _raises([str(path), "does not exist"], fn, path)
    _raises([str(path), "does not exist"], load, str(path))


def test_directory_is_a_clear_error(tmp_path):
    for fn in (load, load_long, load_wide):
        _raises([str(tmp_path), "is a directory"], fn, tmp_path)


def test_missing_fsspec_url_is_a_clear_error():
    url = "memory://elegantpod-test/no-such-dir/nope.csv"
    _raises([url, "does not exist"], load, url)
    _raises([url, "does not exist"], load_wide, url)


def test_http_404_is_a_clear_error(tmp_path):
    pytest.importorskip("aiohttp")
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _wide_frame().to_csv(tmp_path / "here.csv", index=False)
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert load(f"{base}/here.csv").tickers == TICKERS
        _raises([f"{base}/gone.csv", "does not exist"], load, f"{base}/gone.csv")
    finally:
        server.shutdown()
        server.server_close()


def test_empty_and_binary_files(tmp_path):
    cases = {
        "empty.csv": (b"", "is empty"),
        "blank.csv": (b"\n\n", "is empty"),
        "random.csv": (bytes(range(256)) * 8, "binary"),
        "nul.csv": (b"\x00" * 64, "binary"),
        "zip.csv": (b"PK\x03\x04\x14\x00\x00\x00\x08\x00\xa4\x8b" * 8, "binary"),
        "bad.csv.gz": (b"not gzip at all", "cannot read"),
        "ragged.csv": (b"date,AAA\n2021-03-01,1\n2021-03-02,1,2,3\n", "cannot read"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        for fn in (load, load_long, load_wide):
            _raises([str(path), message], fn, path)


def test_garbage_parquet_files(tmp_path):
    pytest.importorskip("pyarrow")
    for name, content in (("empty.parquet", b""), ("text.pq", b"date,AAA\n2021-03-01,1\n")):
        path = tmp_path / name
        path.write_bytes(content)
        _raises([str(path), "cannot read", "as parquet"], load, path)


def test_parquet_dataset_directory(tmp_path):
    pytest.importorskip("pyarrow")
    folder = tmp_path / "closes.parquet"  # as Spark and pyarrow write datasets
    folder.mkdir()
    frame = _wide_frame()
    frame.to_parquet(folder / "part-0.parquet", index=False)
    _assert_same(load(folder), load_wide(frame), fields=("close",))


def test_parquet_without_pyarrow_names_the_fix(tmp_path, monkeypatch):
    path = tmp_path / "closes.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if it were not installed
    with pytest.raises(ImportError) as info:
        load(path)
    assert "reading parquet needs pyarrow: pip install pyarrow" in str(info.value)
    assert str(path) in str(info.value)


def test_repeated_column_in_a_csv_header(tmp_path):
    # pandas would load the second AAA as a ticker "AAA.1"
    path = tmp_path / "closes.csv"
    frame = _wide_frame()
    frame.columns = ["date", "AAA", "BBB", "AAA"]
    frame.to_csv(path, index=False)
    for fn in (load, load_wide, load_long):
        _raises([str(path), "'AAA' more than once"], fn, path)
    # a long-format file too, and names that differ only in case collide there
    path = tmp_path / "long.csv"
    _long_frame().rename(columns={"open": "Close"}).to_csv(path, index=False)
    _raises([str(path), "'close' more than once"], load, path)


def test_unsupported_source():
    with pytest.raises(TypeError, match="int"):
        load(42)


# ---------------------------------------------------------------------- DateSplits
def _splits(**over) -> DateSplits:
    ranges = {
        "train": ("1990-01-01", "2015-12-31"),
        "validation": ("2016-01-01", "2018-12-31"),
        "backtest": ("2019-01-01", "2022-12-31"),
    }
    return DateSplits(**{**ranges, **over})


def test_splits_normalize_dates():
    splits = _splits(
        train=(pd.Timestamp("1990-1-2"), dt.date(2015, 12, 31)),
        validation=["2016-1-4", "2018-12-31 16:00"],
        backtest=("2019/01/02", np.datetime64("2022-12-30")),
    )
    assert splits.train == ("1990-01-02", "2015-12-31")
    assert splits.validation == ("2016-01-04", "2018-12-31")
    assert splits.backtest == ("2019-01-02", "2022-12-30")
    # A range may be a single day.
    assert _splits(validation=("2016-01-04", "2016-01-04")).validation == ("2016-01-04",) * 2


def test_splits_reject_overlap_and_order():
    _raises(
        ["validation must start after train ends", "2015-12-31"],
        _splits,
        validation=("2015-12-31", "2018-12-31"),
    )
    _raises(
        ["backtest must start after validation ends", "2018-06-01"],
        _splits,
        backtest=("2018-06-01", "2022-12-31"),
    )
    # Out of order: validation before train.
    _raises(
        ["validation must start after train ends", "1980-01-01"],
        _splits,
        validation=("1980-01-01", "1985-12-31"),
    )
    # Times of day do not sneak two ranges onto the same day.
    _raises(
        ["validation must start after train ends"],
        _splits,
        train=("1990-01-01", "2015-12-31 09:00"),
        validation=("2015-12-31 17:00", "2018-12-31"),
    )


def test_splits_reject_end_before_start_and_bad_values():
    _raises(
        ["train ends ('1989-12-31') before it starts ('1990-01-01')"],
        _splits,
        train=("1990-01-01", "1989-12-31"),
    )
    _raises(["backtest must be a (start, end) pair"], _splits, backtest=("2019-01-01",))
    _raises(["backtest must be a (start, end) pair"], _splits, backtest="2019-01-01")
    _raises(["validation date 'soon'"], _splits, validation=("soon", "2018-12-31"))


def test_tournament_options():
    splits = _splits()
    assert splits.tournament_options(data="sp500", episode_days=252) == {
        "env_kwargs": {
            "data": "sp500",
            "episode_days": 252,
            "start": "1990-01-01",
            "end": "2015-12-31",
        },
        "eval_env_kwargs": {"start": "2016-01-01", "end": "2018-12-31", "episode_days": None},
        "fitness": "sharpe",
        "eval_episodes": 1,
    }
    assert splits.tournament_options(fitness="calmar")["fitness"] == "calmar"
    # The env's own start/end never override the split.
    assert splits.train_kwargs(start="1900-01-01")["start"] == "1990-01-01"
    # The backtest range appears nowhere in what the tournament sees.
    assert "2019-01-01" not in repr(splits.tournament_options())


@pytest.mark.parametrize(
    "evil", ['=HYPERLINK("http://evil","click")', "+SUM(1)", "-1+1", "@cmd", "\tX", "\rX", "A\nB"]
)
def test_formula_like_tickers_are_refused_at_load(evil, tmp_path):
    from elegantpod.finance.market.prices import load

    dates = pd.bdate_range("2020-01-01", periods=5)
    frame = pd.DataFrame({"AAA": np.arange(1.0, 6.0), evil: np.arange(2.0, 7.0)}, index=dates)
    with pytest.raises(ValueError, match="spreadsheet would run it as a formula") as err:
        load(frame)
    assert repr(evil[:200]) in str(err.value)
    if evil[:1] in "=+-@":  # and as a CSV's header (blank and control names do not survive one)
        path = tmp_path / "prices.csv"
        frame.rename_axis("date").to_csv(path)
        with pytest.raises(ValueError, match="refused"):
            load(str(path))


def test_index_like_and_real_tickers_load():
    from elegantpod.finance.market.names import check_name
    from elegantpod.finance.market.prices import load

    dates = pd.bdate_range("2020-01-01", periods=5)
    names = ["^GSPC", "BRK.B", "600519", "S&P 500"]
    frame = pd.DataFrame({n: np.arange(1.0, 6.0) for n in names}, index=dates)
    assert list(load(frame).tickers) == names
    assert check_name("x" * 64) and pytest.raises(ValueError, check_name, "x" * 65)


YFINANCE = """Price,Close,Close,High,High,Low,Low,Open,Open,Volume,Volume
Ticker,AAPL,MSFT,AAPL,MSFT,AAPL,MSFT,AAPL,MSFT,AAPL,MSFT
Date,,,,,,,,,,
2024-01-02,185.6,370.8,188.4,375.9,183.9,366.5,187.1,373.8,82488700,25258600
2024-01-03,184.2,370.6,185.9,373.3,183.4,368.5,184.2,369.0,58414500,23083500
2024-01-04,181.9,367.9,183.1,373.1,180.9,367.2,182.1,370.7,71983600,20901500
"""


def test_a_yfinance_download_csv_is_read_as_its_tickers(tmp_path):
    """``yf.download(["AAPL", "MSFT"]).to_csv(path)``: fields over tickers in two header
    rows, then a ``Date`` row; read as two tickers with open, high, low, close, volume
    (it was read as a wide table of columns named Close, Close.1...)."""
    path = tmp_path / "yf.csv"
    path.write_text(YFINANCE)
    data = load(str(path))
    assert data.tickers == ("AAPL", "MSFT") and data.has_high_low
    np.testing.assert_allclose(data.close[:, 1], [370.8, 370.6, 367.9])
    np.testing.assert_allclose(data.high[0], [188.4, 375.9])
    assert str(data.dates[0].date()) == "2024-01-02"


def test_whole_trading_days_missing_load_with_a_note_of_the_longest_gap(tmp_path, caplog):
    """Issue 59, item 6: a gap that a failed download leaves is named, not silent; the
    shipped sample's known closures (2001-09-11 among them) are not."""
    import logging

    dates = list(pd.bdate_range("2020-01-01", periods=40))
    del dates[10:17]  # seven business days missing: 2020-01-15 to 2020-01-23
    frame = pd.DataFrame({"date": dates, "AAA": range(1, 34), "BBB": range(2, 35)})
    path = tmp_path / "closes.csv"
    frame.to_csv(path, index=False)
    with caplog.at_level(logging.WARNING, logger="elegantpod.finance.market.prices"):
        data = load(str(path))
    assert len(data.dates) == 33  # loaded, not refused
    (record,) = [r for r in caplog.records if "gap" in r.getMessage()]
    text = record.getMessage()
    assert "1 gap(s)" in text and "2020-01-14 to 2020-01-24 (10 days)" in text, text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="elegantpod.finance.market.prices"):
        load("sp500")
        load(str(path), note_gaps=False)
    assert not [r for r in caplog.records if "gap" in r.getMessage()]
