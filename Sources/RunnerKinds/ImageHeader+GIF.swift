// GIF: the logical screen gives the size; the blocks after it are walked to the end to count the
// frames and to tell a body cut inside a frame from one that merely lacks its trailer byte.
// Stray bytes between blocks after the first frame are skipped, as lenient decoders skip them.

extension ImageHeader {
    static func parseGIF(_ bytes: ImageByteReader, total: Int) throws(Error) -> ImageHeader {
        // "GIF87a" or "GIF89a", then the logical screen width and height, little-endian.
        guard let version = bytes.slice(3, 3) else { throw .truncated(.gif) }
        guard version == Array("87a".utf8) || version == Array("89a".utf8) else {
            throw .malformed(.gif, "unknown version \"\(printable(version))\"")
        }
        guard let width = bytes.uint16LE(6), let height = bytes.uint16LE(8), let flags = bytes[10] else {
            throw .truncated(.gif)
        }
        var header = try checked(.gif, width: Int(width), height: Int(height))
        // Logical screen descriptor (7 bytes after the 6 of the signature), then the global colour table.
        var offset = 13 + (flags & 0x80 != 0 ? 3 << (Int(flags & 7) + 1) : 0)
        var frames = 0
        while true {
            guard let block = bytes[offset] else {
                // Browsers show a GIF whose last frame is whole but whose trailer byte is missing
                // (CPython's idlelib icons shipped so); a body that ends here after a frame is accepted.
                if frames > 0 && offset == total {
                    break
                }
                throw .cutShort(.gif)
            }
            switch block {
            case 0x3B:  // trailer
                guard frames > 0 else {
                    throw .malformed(.gif, "the image ends before its first frame")
                }
                header.frames = frames
                return header
            case 0x21:  // extension: label, then data sub-blocks
                offset = try skipSubBlocks(bytes, from: offset + 2)
            case 0x2C:  // image descriptor (10 bytes), local colour table, LZW code size, data sub-blocks
                guard let imageFlags = bytes[offset + 9] else { throw .cutShort(.gif) }
                offset += 10 + (imageFlags & 0x80 != 0 ? 3 << (Int(imageFlags & 7) + 1) : 0) + 1
                offset = try skipSubBlocks(bytes, from: offset)
                frames += 1
            default:
                // Bytes that start no block after a frame (a second header written into the
                // stream, padding) are passed over one at a time, as ImageMagick's reader and the
                // GIF87a rule do, until the next block.
                guard frames > 0 else {
                    throw .malformed(.gif, "unexpected block \(hex(block)) at offset \(offset)")
                }
                offset += 1
            }
        }
        header.frames = frames
        return header
    }

    /// The offset after a run of data sub-blocks (each a length byte and that many bytes) and its
    /// zero terminator.
    private static func skipSubBlocks(_ bytes: ImageByteReader, from start: Int) throws(Error) -> Int {
        var offset = start
        while true {
            guard let length = bytes[offset] else { throw .cutShort(.gif) }
            offset += 1
            if length == 0 {
                return offset
            }
            offset += Int(length)
        }
    }
}
