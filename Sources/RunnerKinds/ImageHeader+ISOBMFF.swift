// HEIC/HEIF and AVIF: ISO base media files. `ftyp` brands tell which; the `meta` box names the
// primary item (`pitm`), and its image spatial extents property (`ispe`, found through `ipma` in
// `iprp`) gives the size. An AVIF sequence (`avis`) also has a `moov` box whose picture track
// counts the frames in its sample size box (`stsz`). The top-level boxes must end within the body.

extension ImageHeader {
    /// A box: its type, where its payload starts and where it ends.
    struct Box {
        var type: [UInt8]
        var payload: Int
        var end: Int

        func `is`(_ name: String) -> Bool { type == Array(name.utf8) }
    }

    /// The boxes from `start` to `end`. A box whose header runs past the bytes given throws
    /// `truncated`; a box that ends past `end` throws `malformed`, or at the top level (`topLevel`)
    /// ends the list and sets `cut`.
    static func boxes(
        _ bytes: ImageByteReader, from start: Int, to end: Int, format: ImageFormat,
        topLevel: Bool = false, cut: inout Bool
    ) throws(Error) -> [Box] {
        var found: [Box] = []
        var offset = start
        while offset < end {
            guard end - offset >= 8 else {
                throw .malformed(format, "\(end - offset) stray bytes after the last box")
            }
            guard let size32 = bytes.uint32BE(offset), let type = bytes.slice(offset + 4, 4) else {
                throw .truncated(format)
            }
            var header = 8
            var size = Int(size32)
            if size32 == 1 {
                guard let size64 = bytes.uint64BE(offset + 8) else { throw .truncated(format) }
                guard size64 <= UInt64(Int.max / 2) else {
                    throw .malformed(format, "box \"\(printable(type))\" of \(size64) bytes")
                }
                header = 16
                size = Int(size64)
            } else if size32 == 0 {
                size = end - offset  // to the end
            }
            guard size >= header else {
                throw .malformed(format, "box \"\(printable(type))\" of \(size) bytes")
            }
            if offset + size > end {
                guard topLevel else {
                    throw .malformed(format, "box \"\(printable(type))\" overruns its parent")
                }
                cut = true
                found.append(Box(type: type, payload: offset + header, end: offset + size))
                return found
            }
            found.append(Box(type: type, payload: offset + header, end: offset + size))
            offset += size
        }
        return found
    }

    /// The children of a box that must lie within the bytes given.
    private static func children(
        _ bytes: ImageByteReader, of box: Box, skip: Int = 0, format: ImageFormat
    ) throws(Error) -> [Box] {
        guard box.end <= bytes.count else { throw .truncated(format) }
        var cut = false
        return try boxes(bytes, from: box.payload + skip, to: box.end, format: format, cut: &cut)
    }

    /// AVIF or HEIC from the `ftyp` brands (major brand first, then the compatible ones); nil for
    /// an ISO file that is no still image or image sequence (MP4 video, QuickTime).
    static func isoImageFormat(_ bytes: ImageByteReader) -> ImageFormat? {
        guard let size = bytes.uint32BE(0), size >= 12 else { return nil }
        var brands: [[UInt8]] = []
        if let major = bytes.slice(8, 4) { brands.append(major) }
        var offset = 16
        while offset + 4 <= min(Int(size), 256), let brand = bytes.slice(offset, 4) {
            brands.append(brand)
            offset += 4
        }
        for brand in brands {
            switch String(decoding: brand, as: UTF8.self) {
            case "avif", "avis": return .avif
            case "heic", "heix", "heim", "heis", "hevc", "hevx", "hevm", "hevs": return .heic
            default: continue
            }
        }
        // Plain HEIF brands, with no codec brand: an image all the same.
        return brands.contains { ["mif1", "msf1", "mif2"].contains(String(decoding: $0, as: UTF8.self)) } ? .heic : nil
    }

    static func parseISOBMFF(_ bytes: ImageByteReader, total: Int, format: ImageFormat) throws(Error) -> ImageHeader {
        // Walk the top level first: every box header there must be readable and the last box must end
        // by the end of the body. A box cut short is reported after the header, if that is readable.
        var cut = false
        let top = try boxes(bytes, from: 0, to: total, format: format, topLevel: true, cut: &cut)
        var size: (width: Int, height: Int)?
        var orientation = 1
        if let meta = top.first(where: { $0.is("meta") }), let primary = try primaryItemSize(bytes, meta: meta, format: format) {
            size = (primary.width, primary.height)
            orientation = primary.orientation
        }
        var frames = 1
        if let moov = top.first(where: { $0.is("moov") }) {
            let track = try pictureTrack(bytes, moov: moov, format: format)
            frames = track.frames
            size = size ?? track.size
        }
        // The coded image lies in an mdat box: without one, the body ends before it. (An image whose
        // data all sits in the meta box's idat is refused too; encoders do not write such files.)
        if cut || !top.contains(where: { $0.is("mdat") }) {
            throw .cutShort(format)
        }
        guard let size else {
            throw top.contains(where: { $0.is("meta") || $0.is("moov") })
                ? .malformed(format, "the primary item has no size (ispe)") : .malformed(format, "no meta box")
        }
        var header = try checked(format, width: size.width, height: size.height)
        header.frames = max(frames, 1)
        header.orientation = orientation
        return header
    }

    /// The primary item's transformative properties, in the order `ipma` lists them, as one EXIF
    /// orientation: `irot` turns anticlockwise by quarter turns, `imir` exchanges top and bottom
    /// (axis 0) or left and right (axis 1), as ISO/IEC 23008-12 says and libheif shows them.
    struct Transform {
        /// Mirrored left-right first, then turned clockwise by `quarterTurns`.
        var mirrored = false
        var quarterTurns = 0

        mutating func rotate(anticlockwise turns: Int) { quarterTurns = (quarterTurns + 4 - turns % 4) % 4 }

        mutating func mirror(axis: Int) {
            mirrored.toggle()
            quarterTurns = ((axis == 0 ? 6 : 4) - quarterTurns) % 4
        }

        /// EXIF's number for it, 1 to 8.
        var orientation: Int {
            switch (mirrored, quarterTurns) {
            case (false, 0): 1
            case (true, 0): 2
            case (false, 2): 3
            case (true, 2): 4
            case (true, 3): 5
            case (false, 1): 6
            case (true, 1): 7
            default: 8
            }
        }
    }

    /// The `ispe` of the item that `pitm` names, and the orientation its `irot` and `imir` give.
    private static func primaryItemSize(
        _ bytes: ImageByteReader, meta: Box, format: ImageFormat
    ) throws(Error) -> (width: Int, height: Int, orientation: Int)? {
        // meta is a full box: version and flags (4) before its children.
        let items = try children(bytes, of: meta, skip: 4, format: format)
        guard let pitm = items.first(where: { $0.is("pitm") }) else {
            throw .malformed(format, "no primary item (pitm)")
        }
        let primary: Int
        if bytes[pitm.payload] == 0, let id = bytes.uint16BE(pitm.payload + 4) {
            primary = Int(id)
        } else if let id = bytes.uint32BE(pitm.payload + 4) {
            primary = Int(id)
        } else {
            throw .malformed(format, "the pitm box is too short")
        }
        guard let iprp = items.first(where: { $0.is("iprp") }) else { return nil }
        let properties = try children(bytes, of: iprp, format: format)
        guard let ipco = properties.first(where: { $0.is("ipco") }) else { return nil }
        let list = try children(bytes, of: ipco, format: format)
        // ipma: version (1), flags (3), entry count (4), then per item: id (2, or 4 from version 1),
        // association count (1), associations of 1 byte (or 2 with flag 1): essential bit, property index from 1.
        var size: (width: Int, height: Int)?
        var transform = Transform()
        for ipma in properties where ipma.is("ipma") {
            guard let version = bytes[ipma.payload], let flags = bytes[ipma.payload + 3],
                let count = bytes.uint32BE(ipma.payload + 4)
            else {
                throw .malformed(format, "the ipma box is too short")
            }
            var offset = ipma.payload + 8
            for _ in 0..<min(Int(count), ipma.end) {
                let id: Int?
                if version < 1 {
                    id = bytes.uint16BE(offset).map(Int.init)
                    offset += 2
                } else {
                    id = bytes.uint32BE(offset).map(Int.init)
                    offset += 4
                }
                guard let id, let associations = bytes[offset], offset < ipma.end else {
                    throw .malformed(format, "the ipma box is too short")
                }
                offset += 1
                let wide = flags & 1 != 0
                for _ in 0..<Int(associations) {
                    guard offset + (wide ? 2 : 1) <= ipma.end, let first = bytes[offset] else {
                        throw .malformed(format, "the ipma box is too short")
                    }
                    let index = wide ? Int(bytes.uint16BE(offset) ?? 0) & 0x7FFF : Int(first & 0x7F)
                    offset += wide ? 2 : 1
                    guard id == primary, index >= 1, index <= list.count else { continue }
                    let property = list[index - 1]
                    if property.is("ispe"), size == nil {
                        // ispe: version and flags (4), width (4), height (4).
                        guard let width = bytes.uint32BE(property.payload + 4), let height = bytes.uint32BE(property.payload + 8) else {
                            throw .malformed(format, "the ispe box is too short")
                        }
                        size = (Int(width), Int(height))
                    } else if property.is("irot") || property.is("imir") {
                        // One byte: the angle (irot) or the axis (imir) in its low bits.
                        guard let value = bytes[property.payload] else { throw .malformed(format, "the \(property.is("irot") ? "irot" : "imir") box is too short") }
                        if property.is("irot") { transform.rotate(anticlockwise: Int(value & 0x03)) } else { transform.mirror(axis: Int(value & 0x01)) }
                    }
                }
            }
        }
        return size.map { ($0.width, $0.height, transform.orientation) }
    }

    /// The frame count (samples) and size of the first picture or video track of `moov`.
    private static func pictureTrack(
        _ bytes: ImageByteReader, moov: Box, format: ImageFormat
    ) throws(Error) -> (frames: Int, size: (width: Int, height: Int)?) {
        for trak in try children(bytes, of: moov, format: format) where trak.is("trak") {
            let parts = try children(bytes, of: trak, format: format)
            guard let mdia = parts.first(where: { $0.is("mdia") }) else { continue }
            let media = try children(bytes, of: mdia, format: format)
            // hdlr: version and flags (4), pre-defined (4), handler type (4).
            guard let hdlr = media.first(where: { $0.is("hdlr") }),
                bytes.matches("pict", at: hdlr.payload + 8) || bytes.matches("vide", at: hdlr.payload + 8)
            else {
                continue
            }
            var size: (width: Int, height: Int)?
            // tkhd ends with width and height, 16.16 fixed point.
            if let tkhd = parts.first(where: { $0.is("tkhd") }), let width = bytes.uint32BE(tkhd.end - 8),
                let height = bytes.uint32BE(tkhd.end - 4), tkhd.end - tkhd.payload >= 84
            {
                size = (Int(width >> 16), Int(height >> 16))
            }
            guard let minf = media.first(where: { $0.is("minf") }),
                let stbl = try children(bytes, of: minf, format: format).first(where: { $0.is("stbl") }),
                let stsz = try children(bytes, of: stbl, format: format).first(where: { $0.is("stsz") || $0.is("stz2") })
            else {
                return (1, size)
            }
            // stsz: version and flags (4), sample size (4), sample count (4); stz2 likewise, its
            // reserved and field size in place of the sample size.
            guard let count = bytes.uint32BE(stsz.payload + 8) else {
                throw .malformed(format, "the stsz box is too short")
            }
            return (Int(min(count, 1 << 31)), size)
        }
        return (1, nil)
    }
}
