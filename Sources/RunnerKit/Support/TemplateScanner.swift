/// The one scanner of `{…}` placeholders under every template of the runner: a job's URL
/// (`{id}`, a kind file's parameters), a kind file's templates (`{name}`, `{/pointer}`, and `{{`
/// and `}}` for a brace) and a header's secret references (`{env:NAME}`, `{file:PATH}`). Each
/// of those says what a placeholder means; this says where one is.
///
/// A `{` opens a placeholder that ends at the first `}` after it. `read` is handed the text
/// between them and says what it is, or nil when that template does not take it: then the `{`
/// is text and the scan goes on right after it (so `{a{b}` may still hold `{b}`).
///
/// Templates are cut by their UTF-8 bytes: a brace is one byte that is never part of another
/// character's encoding, and each piece is a slice of the template, never a copy.
package enum TemplateScanner {
    package enum Piece<Placeholder> {
        /// Text as written; with `doubledBraces`, a `{{` or `}}` ends a piece with one brace.
        case text(Substring)
        /// What `read` made of a placeholder.
        case placeholder(Placeholder)
        /// A `{` that no `}` follows, with the rest of the template.
        case unclosed(Substring)
        /// With `doubledBraces`: a `}` that closes nothing (the brace itself is not text).
        case strayClose
    }

    /// Hands `body` the pieces of `template` in order. `doubledBraces`: `{{` and `}}` stand for
    /// one brace, and a lone `}` is `strayClose`; without it, `}` outside a placeholder is text.
    @inlinable
    package static func scan<Placeholder, Failure: Error>(
        _ template: String, doubledBraces: Bool = false, read: (Substring) -> Placeholder?,
        _ body: (Piece<Placeholder>) throws(Failure) -> Void
    ) throws(Failure) {
        let open = UInt8(ascii: "{")
        let close = UInt8(ascii: "}")
        let bytes = template.utf8
        var textStart = bytes.startIndex
        var index = textStart
        while index < bytes.endIndex {
            let byte = bytes[index]
            let next = bytes.index(after: index)
            if byte == open {
                if doubledBraces, next < bytes.endIndex, bytes[next] == open {
                    try body(.text(template[textStart..<next]))
                    index = bytes.index(after: next)
                    textStart = index
                    continue
                }
                guard let end = bytes[next...].firstIndex(of: close) else {
                    if textStart < index { try body(.text(template[textStart..<index])) }
                    try body(.unclosed(template[index...]))
                    return
                }
                if let placeholder = read(template[next..<end]) {
                    if textStart < index { try body(.text(template[textStart..<index])) }
                    try body(.placeholder(placeholder))
                    index = bytes.index(after: end)
                    textStart = index
                } else {
                    index = next
                }
            } else if doubledBraces, byte == close {
                if next < bytes.endIndex, bytes[next] == close {
                    try body(.text(template[textStart..<next]))
                    index = bytes.index(after: next)
                } else {
                    if textStart < index { try body(.text(template[textStart..<index])) }
                    try body(.strayClose)
                    index = next
                }
                textStart = index
            } else {
                index = next
            }
        }
        if textStart < bytes.endIndex { try body(.text(template[textStart...])) }
    }
}
