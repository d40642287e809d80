extension UnsafeBufferPointer<UInt8> {
    /// Whether every byte is ASCII (below 0x80): one pass, no branch per byte. Plain ASCII is
    /// the usual job line, path and URL, so it takes fast paths that skip UTF-8 work.
    var isASCII: Bool {
        var high: UInt8 = 0
        for byte in self { high |= byte }
        return high < 0x80
    }
}
