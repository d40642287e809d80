// JPEG: walk the marker segments after SOI until a frame header (SOFn) gives the size; an APP1
// segment holding EXIF on the way gives the orientation. Between segments, as libjpeg's
// next_marker does (it warns "extraneous bytes before marker" and decodes on, as browsers do),
// stray bytes, 0xFF fill bytes and a stuffed 0xFF 0x00 are passed over.

extension ImageHeader {
    static func parseJPEG(_ bytes: ImageByteReader) throws(Error) -> ImageHeader {
        var offset = 2
        var orientation = 1
        while true {
            guard let lead = bytes[offset] else { throw .truncated(.jpeg) }
            offset += 1
            guard lead == 0xFF else { continue }  // a stray byte before the next marker
            // Any number of 0xFF fill bytes may precede a marker.
            while bytes[offset] == 0xFF {
                offset += 1
            }
            guard let marker = bytes[offset] else { throw .truncated(.jpeg) }
            offset += 1
            switch marker {
            case 0x01, 0xD0...0xD8:
                continue  // TEM, RSTn, SOI: standalone markers without a length
            case 0x00:
                continue  // a stuffed zero: not a marker, keep looking
            case 0xD9:
                throw .malformed(.jpeg, "the image ends before its frame header")
            case 0xDA:
                throw .malformed(.jpeg, "a scan starts before the frame header")
            default:
                break
            }
            guard let length = bytes.uint16BE(offset) else { throw .truncated(.jpeg) }
            guard length >= 2 else {
                throw .malformed(.jpeg, "segment \(hex(marker)) has length \(length)")
            }
            if isStartOfFrame(marker) {
                // Length (2), precision (1), height (2), width (2).
                guard length >= 7 else {
                    throw .malformed(.jpeg, "frame header of length \(length)")
                }
                guard let height = bytes.uint16BE(offset + 3), let width = bytes.uint16BE(offset + 5) else {
                    throw .truncated(.jpeg)
                }
                var header = try checked(.jpeg, width: Int(width), height: Int(height))
                header.orientation = orientation
                return header
            }
            // APP1: "Exif\0\0", then a TIFF structure. The first EXIF segment counts.
            if marker == 0xE1, orientation == 1, bytes.matches("Exif\0\0", at: offset + 2) {
                let count = Int(length) - 8
                if count > 0, bytes.has(offset + 8, count) {
                    orientation = exifOrientation(bytes, from: offset + 8, count: count) ?? 1
                }
            }
            offset += Int(length)
        }
    }

    /// SOF0-3, 5-7, 9-11, 13-15; not DHT (C4), JPG (C8) or DAC (CC), which share the range.
    private static func isStartOfFrame(_ marker: UInt8) -> Bool {
        switch marker {
        case 0xC0...0xCF: marker != 0xC4 && marker != 0xC8 && marker != 0xCC
        default: false
        }
    }
}
