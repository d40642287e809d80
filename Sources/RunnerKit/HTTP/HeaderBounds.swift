/// How much header a response may carry, the same for both HTTP clients.
package enum HeaderBounds {
    /// Largest header block of one response, in bytes, status line and line endings included.
    package static let maxBytes = 100 * 1024
    /// Most header lines of one response, status line included.
    package static let maxLines = 500

    /// Why a header block of `bytes` bytes in `lines` lines is refused, or nil.
    package static func excess(bytes: Int, lines: Int) -> String? {
        if lines > maxLines { return "refused the response: it has more than \(maxLines) header lines" }
        if bytes > maxBytes { return "refused the response: its headers exceed \(maxBytes / 1024) KiB" }
        return nil
    }
}
