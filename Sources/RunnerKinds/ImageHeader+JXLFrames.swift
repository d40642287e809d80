// JPEG XL: where a bare codestream ends. It has no end marker: its headers are bit-packed
// bundles (ISO/IEC 18181-1) in which the SizeHeader and ImageMetadata come first, then each
// frame's FrameHeader and table of contents (TOC), whose entries are the byte sizes of the
// frame's sections; the frame marked is_last ends the codestream. These headers are read here
// only to find that end, the way a decoder reads them before it decodes anything. What only
// entropy decoding could pass (an embedded ICC profile, a permuted TOC) and a preview frame
// leave the end unknown: such a codestream is judged by its SizeHeader alone, as before.

extension ImageHeader {
    /// How reading a codestream's headers stopped short of its end.
    enum JXLStop: Swift.Error {
        /// The bytes ran out: the codestream is cut (or, given only its first bytes, needs more).
        case ended
        /// The end cannot be told without entropy decoding.
        case unknown
    }

    /// The offset in `bytes` just past the codestream that starts at `start` (at its FF 0A), and
    /// how many frames it shows (an animation's; frames only blended into others not counted).
    static func jxlCodestreamEnd(_ bytes: [UInt8], from start: Int) throws(JXLStop) -> (end: Int, frames: Int) {
        var bits = JXLBits(bytes: bytes, position: (start + 2) * 8)
        let size = try bits.sizeHeader()
        let metadata = try bits.imageMetadata()
        if metadata.wantsICC || metadata.hasPreview { throw .unknown }
        var shown = 0
        while true {
            bits.padToByte()
            let frame = try bits.frame(size: size, metadata: metadata)
            bits.position = frame.end * 8
            if frame.isShown { shown += 1 }
            if frame.isLast { return (frame.end, max(1, shown)) }
        }
    }
}

/// The ImageMetadata fields that frame headers depend on.
private struct JXLMetadata {
    var xybEncoded = true
    var extraChannels = 0
    var hasAnimation = false
    var hasTimecodes = false
    var hasPreview = false
    var wantsICC = false
}

/// Reads bit fields from `bytes`, least significant bit of each byte first, as JPEG XL packs them.
private struct JXLBits {
    let bytes: [UInt8]
    /// In bits from the start of `bytes`.
    var position: Int

    typealias Stop = ImageHeader.JXLStop

    mutating func bits(_ count: Int) throws(Stop) -> Int {
        guard count > 0 else { return 0 }
        guard position >= 0, position + count <= bytes.count * 8 else { throw .ended }
        var value = 0
        for shift in 0..<count {
            value |= Int((bytes[position >> 3] >> UInt8(position & 7)) & 1) << shift
            position += 1
        }
        return value
    }

    mutating func bool() throws(Stop) -> Bool { try bits(1) == 1 }

    mutating func skip(_ count: Int) throws(Stop) {
        guard count >= 0, position + count <= bytes.count * 8 else { throw .ended }
        position += count
    }

    mutating func padToByte() { position = (position + 7) & ~7 }

    /// U32: a 2-bit selector chooses one of four distributions, each an offset plus that many bits
    /// (no bits: a constant).
    mutating func u32(_ d0: (Int, Int), _ d1: (Int, Int), _ d2: (Int, Int), _ d3: (Int, Int)) throws(Stop) -> Int {
        let (offset, count) = [d0, d1, d2, d3][try bits(2)]
        return offset + (try bits(count))
    }

    /// U64: 0, 1 + 4 bits, 17 + 8 bits, or 12 bits continued by 8-bit groups (4 at the last).
    mutating func u64() throws(Stop) -> UInt64 {
        switch try bits(2) {
        case 0: return 0
        case 1: return UInt64(try bits(4)) + 1
        case 2: return UInt64(try bits(8)) + 17
        default:
            var value = UInt64(try bits(12))
            var shift: UInt64 = 12
            while try bool() {
                if shift == 60 {
                    value |= UInt64(try bits(4)) << shift
                    break
                }
                value |= UInt64(try bits(8)) << shift
                shift += 8
            }
            return value
        }
    }

    mutating func enumValue() throws(Stop) -> Int { try u32((0, 0), (1, 0), (2, 4), (18, 6)) }

    mutating func f16(_ count: Int = 1) throws(Stop) { try skip(16 * count) }

    /// Extensions: a mask, a length in bits for each extension it names, then those bits.
    mutating func extensions() throws(Stop) {
        var mask = try u64()
        var total: UInt64 = 0
        while mask != 0 {
            if mask & 1 == 1 {
                let (sum, overflow) = total.addingReportingOverflow(try u64())
                guard !overflow else { throw .ended }
                total = sum
            }
            mask >>= 1
        }
        guard total <= UInt64(bytes.count) * 8 else { throw .ended }
        try skip(Int(total))
    }

    mutating func name() throws(Stop) { try skip(8 * (try u32((0, 0), (0, 4), (16, 5), (48, 10)))) }

    mutating func bitDepth() throws(Stop) {
        if try bool() {
            _ = try u32((32, 0), (16, 0), (24, 0), (1, 6))
            try skip(4)
        } else {
            _ = try u32((8, 0), (10, 0), (12, 0), (1, 6))
        }
    }

    // MARK: - Image headers

    /// The image's width and height.
    mutating func sizeHeader() throws(Stop) -> (width: Int, height: Int) {
        let small = try bool()
        let height = small ? (try bits(5) + 1) * 8 : try u32((1, 9), (1, 13), (1, 18), (1, 30))
        let ratio = try bits(3)
        guard ratio == 0 else {
            let (numerator, denominator) = [(1, 1), (12, 10), (4, 3), (3, 2), (16, 9), (5, 4), (2, 1)][ratio - 1]
            return (height * numerator / denominator, height)
        }
        let width = small ? (try bits(5) + 1) * 8 : try u32((1, 9), (1, 13), (1, 18), (1, 30))
        return (width, height)
    }

    mutating func imageMetadata() throws(Stop) -> JXLMetadata {
        var metadata = JXLMetadata()
        if !(try bool()) {  // not all_default
            let extraFields = try bool()
            if extraFields {
                try skip(3)  // orientation
                if try bool() { _ = try sizeHeader() }  // intrinsic size
                if try bool() {
                    metadata.hasPreview = true
                    return metadata  // a preview frame comes first: its end is not followed here
                }
                if try bool() {
                    metadata.hasAnimation = true
                    _ = try u32((100, 0), (1000, 0), (1, 10), (1, 30))
                    _ = try u32((1, 0), (1001, 0), (1, 8), (1, 10))
                    _ = try u32((0, 0), (0, 3), (0, 16), (0, 32))
                    metadata.hasTimecodes = try bool()
                }
            }
            try bitDepth()
            _ = try bool()  // modular_16bit_buffers
            metadata.extraChannels = try u32((0, 0), (1, 0), (2, 4), (1, 12))
            for _ in 0..<metadata.extraChannels { try extraChannelInfo() }
            metadata.xybEncoded = try bool()
            metadata.wantsICC = try colourEncoding()
            if extraFields, !(try bool()) { try f16(3); _ = try bool() }  // tone mapping
            try extensions()
        }
        if !(try bool()) {  // not default_m
            if metadata.xybEncoded, !(try bool()) { try f16(16) }  // opsin inverse matrix
            let weights = try bits(3)
            if weights & 1 != 0 { try f16(15) }
            if weights & 2 != 0 { try f16(55) }
            if weights & 4 != 0 { try f16(210) }
        }
        return metadata
    }

    mutating func extraChannelInfo() throws(Stop) {
        guard !(try bool()) else { return }  // the default: an alpha channel
        let type = try enumValue()
        try bitDepth()
        _ = try u32((0, 0), (3, 0), (4, 0), (1, 3))  // dim_shift
        try name()
        switch type {
        case 0: _ = try bool()  // alpha_associated
        case 2: try f16(4)  // spot colour
        case 5: _ = try u32((1, 0), (0, 2), (3, 4), (19, 8))  // CFA channel
        case 1, 3, 4, 6, 15, 16: break
        default: throw .unknown
        }
    }

    /// Whether an ICC profile follows the headers.
    mutating func colourEncoding() throws(Stop) -> Bool {
        guard !(try bool()) else { return false }  // all_default: sRGB
        let wantsICC = try bool()
        let space = try enumValue()
        guard !wantsICC else { return true }
        let xyb = 2, grey = 1
        if space != xyb, try enumValue() == 2 { try customxy(1) }  // white point
        if space != xyb && space != grey, try enumValue() == 2 { try customxy(3) }  // primaries
        if try bool() { try skip(24) } else { _ = try enumValue() }  // transfer function
        _ = try enumValue()  // rendering intent
        return false
    }

    mutating func customxy(_ count: Int) throws(Stop) {
        for _ in 0..<(2 * count) { _ = try u32((0, 19), (524_288, 19), (1_048_576, 20), (2_097_152, 21)) }
    }

    // MARK: - Frames

    /// Reads one frame's header and TOC; its end is after the TOC plus the sizes it lists.
    mutating func frame(size: (width: Int, height: Int), metadata: JXLMetadata) throws(Stop) -> (end: Int, isLast: Bool, isShown: Bool) {
        let allDefault = try bool()
        var frameType = 0, modular = false, flags: UInt64 = 0
        if !allDefault {
            frameType = try bits(2)
            modular = try bits(1) == 1
            flags = try u64()
        }
        let regular = 0, lfFrame = 1, referenceOnly = 2, skipProgressive = 3
        let normal = frameType == regular || frameType == skipProgressive
        let usesLFFrame = flags & 0x20 != 0
        if !allDefault && !metadata.xybEncoded, try bool(), !usesLFFrame { try skip(6) }  // do_ycbcr, jpeg_upsampling
        var upsampling = 1
        if !allDefault && !usesLFFrame {
            upsampling = try u32((1, 0), (2, 0), (4, 0), (8, 0))
            for _ in 0..<metadata.extraChannels { _ = try u32((1, 0), (2, 0), (4, 0), (8, 0)) }
        }
        let groupSizeShift = modular ? try bits(2) : 1
        if !allDefault && metadata.xybEncoded && !modular { try skip(6) }  // x_qm_scale, b_qm_scale
        var passes = 1
        if !allDefault && frameType != referenceOnly {
            passes = try u32((1, 0), (2, 0), (3, 0), (4, 3))
            if passes != 1 {
                let downsamples = try u32((0, 0), (1, 0), (2, 0), (3, 1))
                try skip(2 * (passes - 1))  // shifts
                for _ in 0..<downsamples { _ = try u32((1, 0), (2, 0), (4, 0), (8, 0)) }
                for _ in 0..<downsamples { _ = try u32((0, 0), (1, 0), (2, 0), (0, 3)) }  // last passes
            }
        }
        let lfLevel = frameType == lfFrame ? try bits(2) + 1 : 0
        var crop = (x: 0, y: 0, width: size.width, height: size.height)
        let hasCrop = !allDefault && frameType != lfFrame ? try bool() : false
        if hasCrop {
            let position = ((0, 8), (256, 11), (2304, 14), (18688, 30))
            if frameType != referenceOnly {
                crop.x = Self.unpackSigned(try u32(position.0, position.1, position.2, position.3))
                crop.y = Self.unpackSigned(try u32(position.0, position.1, position.2, position.3))
            }
            crop.width = try u32(position.0, position.1, position.2, position.3)
            crop.height = try u32(position.0, position.1, position.2, position.3)
        }
        // A frame "resets the canvas" when it replaces all of it.
        let coversImage = crop.x <= 0 && crop.y <= 0 && crop.x + crop.width >= size.width && crop.y + crop.height >= size.height
        let resets = { (mode: Int) in mode == 0 && (!hasCrop || coversImage) }
        var mode = 0
        if !allDefault && normal {
            mode = try blendingInfo(extraChannels: metadata.extraChannels > 0, resets: resets, main: nil)
            for _ in 0..<metadata.extraChannels {
                _ = try blendingInfo(extraChannels: true, resets: resets, main: mode)
            }
        }
        var duration = 0
        if !allDefault && normal && metadata.hasAnimation { duration = try u32((0, 0), (1, 0), (0, 8), (0, 32)) }
        if !allDefault && normal && metadata.hasTimecodes { try skip(32) }
        var isLast = frameType == regular
        if !allDefault && normal { isLast = try bool() }
        var saveAsReference = 0
        if !allDefault && frameType != lfFrame && !isLast { saveAsReference = try bits(2) }
        if !allDefault
            && (frameType == referenceOnly
                || (resets(mode) && !isLast && (duration == 0 || saveAsReference != 0) && frameType != lfFrame))
        {
            _ = try bool()  // save_before_ct
        }
        if !allDefault {
            try name()
            try restorationFilter(modular: modular)
            try extensions()
        }
        let entries = Self.tocEntries(
            width: crop.width, height: crop.height, upsampling: upsampling, lfLevel: lfLevel,
            groupDim: 128 << groupSizeShift, passes: passes)
        guard entries <= 65_536 else { throw .unknown }
        guard !(try bool()) else { throw .unknown }  // a permuted TOC is entropy coded
        padToByte()
        var total = 0
        for _ in 0..<entries {
            total += try u32((0, 10), (1024, 14), (17_408, 22), (4_211_712, 30))
        }
        padToByte()
        // Shown: a normal frame that is the last or stays on screen for a while (others are
        // blended into the next one).
        return (position / 8 + total, isLast, normal && (isLast || duration != 0))
    }

    /// A BlendingInfo's blend mode.
    mutating func blendingInfo(extraChannels: Bool, resets: (Int) -> Bool, main: Int?) throws(Stop) -> Int {
        let mode = try u32((0, 0), (1, 0), (2, 0), (3, 2))
        let blend = 2, mulAdd = 3, mul = 4
        if extraChannels && (mode == blend || mode == mulAdd) { _ = try u32((0, 0), (1, 0), (2, 0), (3, 3)) }  // alpha channel
        if (extraChannels && (mode == blend || mode == mulAdd)) || mode == mul { _ = try bool() }  // clamp
        if !resets(main ?? mode) { try skip(2) }  // source
        return mode
    }

    mutating func restorationFilter(modular: Bool) throws(Stop) {
        guard !(try bool()) else { return }  // all_default
        if try bool(), try bool() { try f16(6) }  // Gabor-like filter, custom weights
        if try bits(2) != 0 {  // edge-preserving filter iterations
            if !modular, try bool() { try f16(8) }  // sharpness
            if try bool() { try f16(3); try skip(32) }  // channel weights
            if try bool() { try f16(modular ? 3 : 4) }  // sigma
            if modular { try f16() }
        }
        try extensions()
    }

    static func unpackSigned(_ value: Int) -> Int { value & 1 == 0 ? value >> 1 : -((value + 1) >> 1) }

    /// How many sections the TOC lists: one for a frame of one group and one pass, else the LF
    /// global section, the LF groups, the HF global section and each group of each pass.
    static func tocEntries(width: Int, height: Int, upsampling: Int, lfLevel: Int, groupDim: Int, passes: Int) -> Int {
        var sampleWidth = (width + upsampling - 1) / upsampling
        var sampleHeight = (height + upsampling - 1) / upsampling
        if lfLevel > 0 {
            let scale = 1 << (3 * lfLevel)
            sampleWidth = (sampleWidth + scale - 1) / scale
            sampleHeight = (sampleHeight + scale - 1) / scale
        }
        func count(_ dim: Int) -> Int { ((sampleWidth + dim - 1) / dim) * ((sampleHeight + dim - 1) / dim) }
        let groups = count(groupDim)
        if groups == 1 && passes == 1 { return 1 }
        return 1 + count(groupDim * 8) + 1 + groups * passes
    }
}
