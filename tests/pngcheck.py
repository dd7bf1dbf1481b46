"""A saved figure is a real picture: the file exists, has the PNG signature, and its pixels are not
all one colour (a figure that drew nothing is a blank canvas)."""
import pathlib

import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(path, min_size=(100, 100)) -> np.ndarray:
    """Check the PNG at ``path``; return its pixels ``(H, W, channels)`` in [0, 1]."""
    import matplotlib.image as mpimg
    path = pathlib.Path(path)
    assert path.is_file(), f"{path} was not written"
    assert path.read_bytes()[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    img = mpimg.imread(str(path))
    assert img.ndim == 3 and img.shape[0] >= min_size[0] and img.shape[1] >= min_size[1], img.shape
    pixels = img.reshape(-1, img.shape[-1])
    assert np.ptp(pixels, axis=0).max() > 0.1, f"{path} is one colour"
    # more than a stray line: at least 1 % of the pixels differ from the commonest (background) colour
    rgba = np.zeros((len(pixels), 4), dtype=np.uint8)
    rgba[:, :pixels.shape[1]] = np.round(pixels * 255)
    _, counts = np.unique(rgba.view(np.uint32).ravel(), return_counts=True)   # one int per colour: fast
    assert 1 - counts.max() / len(pixels) > 0.01, f"{path} is almost blank"
    return img
