// PNG and APNG: the IHDR chunk gives the size; the chunks before the first IDAT may hold an APNG
// animation control chunk (acTL, the frame count) and EXIF (eXIf, the orientation).

extension ImageHeader {
    static func parsePNG(_ bytes: ImageByteReader, total: Int) throws(Error) -> ImageHeader {
        // Signature (8), then the IHDR chunk: length (4), "IHDR", width (4), height (4), all big-endian.
        guard let type = bytes.slice(12, 4), let width = bytes.uint32BE(16), let height = bytes.uint32BE(20)
        else {
            throw .truncated(.png)
        }
        guard type == Array("IHDR".utf8) else {
            throw .malformed(.png, "the first chunk is not IHDR")
        }
        var header = try checked(.png, width: Int(width), height: Int(height))
        // Walk the chunks after IHDR up to the image data.
        var offset = 8
        while true {
            guard let length = bytes.uint32BE(offset), bytes.has(offset + 4, 4) else { throw .truncated(.png) }
            guard length <= 0x7FFF_FFFF else {
                throw .malformed(.png, "a chunk of length \(length)")
            }
            let data = offset + 8
            let end = data + Int(length) + 4
            if bytes.matches("IDAT", at: offset + 4) {
                return header
            }
            if bytes.matches("IEND", at: offset + 4) {
                throw .malformed(.png, "the image ends before its image data")
            }
            if bytes.matches("acTL", at: offset + 4) {
                guard let frames = bytes.uint32BE(data) else { throw .truncated(.png) }
                header.frames = max(1, Int(min(frames, 1 << 31)))
            }
            if bytes.matches("eXIf", at: offset + 4) {
                guard bytes.has(data, Int(length)) else { throw .truncated(.png) }
                header.orientation = exifOrientation(bytes, from: data, count: Int(length)) ?? header.orientation
            }
            offset = end
            if offset > total {
                throw .cutShort(.png)
            }
        }
    }
}
