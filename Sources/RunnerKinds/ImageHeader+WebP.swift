// WebP: the first chunk gives the size (VP8 lossy, VP8L lossless, VP8X extended). An extended file
// whose flags announce an animation or EXIF has its chunks walked: ANMF chunks count the frames,
// the EXIF chunk (which the format puts after the image data) gives the orientation.

extension ImageHeader {
    static func parseWebP(_ bytes: ImageByteReader, total: Int) throws(Error) -> ImageHeader {
        // "RIFF", size, "WEBP", then the first chunk: fourcc (4), size (4), data from offset 20.
        guard let fourcc = bytes.slice(12, 4) else { throw .truncated(.webp) }
        switch fourcc {
        case Array("VP8 ".utf8):
            // Lossy: a 3-byte frame tag, the start code 9D 01 2A, then 14-bit width and height.
            guard let tag = bytes[20], let code = bytes.slice(23, 3),
                let width = bytes.uint16LE(26), let height = bytes.uint16LE(28)
            else {
                throw .truncated(.webp)
            }
            guard tag & 1 == 0 else {
                throw .malformed(.webp, "the VP8 frame is not a key frame")
            }
            guard code == [0x9D, 0x01, 0x2A] else {
                throw .malformed(.webp, "the VP8 start code is missing")
            }
            return try checked(.webp, width: Int(width & 0x3FFF), height: Int(height & 0x3FFF))
        case Array("VP8L".utf8):
            // Lossless: the signature byte 0x2F, then width - 1 and height - 1 in 14 bits each.
            guard let signature = bytes[20], let bits = bytes.uint32LE(21) else {
                throw .truncated(.webp)
            }
            guard signature == 0x2F else {
                throw .malformed(.webp, "the VP8L signature byte is \(hex(signature))")
            }
            let width = Int(bits & 0x3FFF) + 1
            let height = Int((bits >> 14) & 0x3FFF) + 1
            return try checked(.webp, width: width, height: height)
        case Array("VP8X".utf8):
            // Extended: flags (1), reserved (3), canvas width - 1 and height - 1 in 24 bits each.
            guard let flags = bytes[20], let width = bytes.uint24LE(24), let height = bytes.uint24LE(27),
                let size = bytes.uint32LE(16)
            else {
                throw .truncated(.webp)
            }
            var header = try checked(.webp, width: Int(width) + 1, height: Int(height) + 1)
            let animation: UInt8 = 0x02
            let exif: UInt8 = 0x08
            guard flags & (animation | exif) != 0 else { return header }
            // Walk the chunks after VP8X, up to the end the RIFF header gives: a body that ends
            // sooner is cut short.
            let riffEnd = Int(bytes.uint32LE(4) ?? 0) + 8
            var offset = 20 + Int(size) + Int(size & 1)
            var frames = 0
            while offset + 8 <= riffEnd {
                guard let length = bytes.uint32LE(offset + 4) else { throw .cutShort(.webp) }
                let data = offset + 8
                if bytes.matches("ANMF", at: offset) {
                    frames += 1
                } else if bytes.matches("EXIF", at: offset), flags & exif != 0 {
                    guard bytes.has(data, Int(length)) else { throw .cutShort(.webp) }
                    // Some writers keep JPEG's "Exif\0\0" in front of the TIFF structure.
                    let skip = bytes.matches("Exif\0\0", at: data) ? 6 : 0
                    header.orientation = exifOrientation(bytes, from: data + skip, count: Int(length) - skip) ?? 1
                }
                offset = data + Int(length) + Int(length & 1)
            }
            if flags & animation != 0 {
                header.frames = max(frames, 1)
            }
            return header
        default:
            throw .malformed(.webp, "unknown first chunk \"\(printable(fourcc))\"")
        }
    }
}
