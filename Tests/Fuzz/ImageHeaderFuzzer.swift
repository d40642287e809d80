// libFuzzer target over the image sniffer: ImageHeader.parse, isComplete and describe must
// answer for any bytes, never trap. Built by run.sh with the ImageHeader*.swift files; not part of
// the package.
//
// Also checks the promise the runner's two-step read rests on: given only the first bytes of a
// body and its whole length, `parse` either asks for more (truncated, cut short) or answers what
// it answers for the whole body.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzImageHeader(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let whole = Result { () throws(ImageHeader.Error) in try ImageHeader.parse(bytes) }
    if case .success(let header) = whole {
        precondition(header.width > 0 && header.height > 0, "a parsed image has a size")
        precondition(header.width <= ImageHeader.maximumDimension && header.height <= ImageHeader.maximumDimension)
        precondition(header.frames >= 1 && (1...8).contains(header.orientation))
        _ = ImageHeader.isComplete(header.format, prefix: bytes, suffix: Array(bytes.suffix(64)), totalLength: bytes.count)
    }
    // The first bytes, cut where the last byte of the input says.
    if size > 1 {
        let cut = Int(bytes[size - 1]) * size / 256
        let first = Array(bytes.prefix(cut))
        do {
            let header = try ImageHeader.parse(first, totalLength: size)
            guard case .success(let expected) = whole, expected == header else {
                preconditionFailure("the first \(cut) of \(size) bytes parse to \(header), the whole to \(whole)")
            }
        } catch {
            // "N bytes of unknown data" names the count, so two such answers differ in it.
            var bothNotImages = false
            if case .notAnImage = error, case .failure(.notAnImage) = whole { bothNotImages = true }
            precondition(error.wantsMoreBytes || whole == .failure(error) || bothNotImages || cut < 12,
                         "the first \(cut) of \(size) bytes fail with \(error), the whole with \(whole)")
        }
    }
    for format in ImageFormat.allCases {
        _ = ImageHeader.isComplete(format, prefix: bytes, suffix: Array(bytes.suffix(64)), totalLength: bytes.count)
        _ = ImageHeader.isComplete(format, suffix: bytes, totalLength: bytes.count)
    }
    _ = ImageHeader.describe(bytes)
    return 0
}
