// libFuzzer target over the image sniffer: ImageHeader.parse, isComplete and describe must
// answer for any bytes, never trap. Built by run.sh with ImageHeader.swift; not part of the package.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzImageHeader(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let header = try? ImageHeader.parse(bytes) {
        precondition(header.width > 0 && header.height > 0, "a parsed image has a size")
        precondition(header.width <= ImageHeader.maximumDimension && header.height <= ImageHeader.maximumDimension)
        _ = ImageHeader.isComplete(header.format, prefix: bytes, suffix: Array(bytes.suffix(64)), totalLength: bytes.count)
    }
    for format in ImageFormat.allCases {
        _ = ImageHeader.isComplete(format, prefix: bytes, suffix: Array(bytes.suffix(64)), totalLength: bytes.count)
        _ = ImageHeader.isComplete(format, suffix: bytes, totalLength: bytes.count)
    }
    _ = ImageHeader.describe(bytes)
    return 0
}
