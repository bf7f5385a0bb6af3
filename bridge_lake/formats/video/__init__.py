"""Camera video: the codec map and the one place PyAV is used (codec.py), and H.264 Annex-B
bitstream parsing with numpy (nal.py). normalize/, export/, scenes/ and synth/ use these
instead of setting up decoders of their own."""

from bridge_lake.formats.video.codec import (
    CODECS,
    RAW_CHANNELS,
    RAW_FORMATS,
    STREAMED,
    DecodeError,
    Decoder,
    H264Encoder,
    Reformatter,
    VideoFrame,
    encode_image,
    frame_from_pixels,
)
from bridge_lake.formats.video.nal import NAL_IDR, NAL_SPS, access_units, nal_units, sps_size

__all__ = [
    "CODECS",
    "NAL_IDR",
    "NAL_SPS",
    "RAW_CHANNELS",
    "RAW_FORMATS",
    "STREAMED",
    "DecodeError",
    "Decoder",
    "H264Encoder",
    "Reformatter",
    "VideoFrame",
    "access_units",
    "encode_image",
    "frame_from_pixels",
    "nal_units",
    "sps_size",
]
