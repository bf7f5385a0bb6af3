import av
import numpy as np
import pytest

from bridge_lake.errors import FormatError, TruncatedFileError
from bridge_lake.formats.nclt.images import (
    encode_baseline_tiff,
    iter_lb3_batches,
    read_lb3_image,
    tiff_info,
)

T0 = 1326030975726043


def picture(width, height):
    rng = np.random.default_rng(1)
    return rng.integers(0, 256, (height, width, 3), dtype=np.uint8)


def test_baseline_tiff_decodes_identically_with_an_independent_decoder(tmp_path):
    img = picture(37, 21)
    path = tmp_path / "a.tiff"
    path.write_bytes(encode_baseline_tiff(img.tobytes(), 37, 21))
    with av.open(str(path)) as container:
        frame = next(container.decode(video=0))
    assert (frame.width, frame.height) == (37, 21)
    np.testing.assert_array_equal(frame.to_ndarray(format="rgb24"), img)


def test_lb3_record_keeps_bytes_and_says_how_to_turn_upright(tmp_path):
    cam = tmp_path / "lb3" / "Cam4"
    cam.mkdir(parents=True)
    data = encode_baseline_tiff(picture(16, 12).tobytes(), 16, 12)
    (cam / f"{T0}.tiff").write_bytes(data)
    row = read_lb3_image(cam / f"{T0}.tiff")
    assert row["data"] == data and row["utime"] == T0 and row["camera"] == 4
    assert (row["width"], row["height"], row["upright_width"], row["upright_height"]) == (
        16,
        12,
        12,
        16,
    )
    assert (row["encoding"], row["compression"], row["rotation"]) == (
        "rgb8",
        "none",
        "rotate_90_clockwise",
    )
    batches = list(iter_lb3_batches([cam / f"{T0}.tiff"] * 5, batch_images=2))
    assert [b.num_rows for b in batches] == [2, 2, 1]


def test_damaged_tiffs_are_errors_naming_the_file(tmp_path):
    data = encode_baseline_tiff(picture(8, 8).tobytes(), 8, 8)
    with pytest.raises(TruncatedFileError, match="strips"):
        tiff_info(data[:-10], "cut.tiff")
    with pytest.raises(FormatError, match="not a TIFF"):
        tiff_info(b"GIF89a" + data[6:], "x.tiff")
    with pytest.raises(TruncatedFileError, match="header"):
        tiff_info(data[:5], "short.tiff")
    bad_ifd = data[:4] + (len(data) + 10).to_bytes(4, "little") + data[8:]
    with pytest.raises(TruncatedFileError, match="IFD"):
        tiff_info(bad_ifd, "ifd.tiff")
