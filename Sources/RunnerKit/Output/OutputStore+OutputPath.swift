import Foundation

extension OutputStore {
    /// An `output` must stay inside the output directory and out of its bookkeeping folders.
    ///
    /// The path is read as the file system reads it, byte by byte between `/` bytes: as Swift
    /// characters, a combining mark after a `/` would hide it (`x\u{600}/../y` would seem to
    /// have no `..` part).
    public static func validateOutput(_ path: String) throws(JobSpecError) -> String {
        let bytes = Array(path.utf8)
        let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
        if bytes.isEmpty { throw JobSpecError(field: "output", "must not be empty") }
        if bytes[0] == slash || bytes[0] == UInt8(ascii: "~") {
            throw JobSpecError(field: "output", "must be a path relative to the output directory, not '\(path)'")
        }
        if bytes.contains(0) { throw JobSpecError(field: "output", "must not contain a NUL character") }
        let parts = bytes.split(separator: slash, omittingEmptySubsequences: true).filter { !($0.count == 1 && $0.first == dot) }
        if parts.contains(where: { $0.elementsEqual([dot, dot]) }) {
            throw JobSpecError(field: "output", "must not climb out of the output directory with '..'")
        }
        guard let first = parts.first, let last = parts.last else {
            throw JobSpecError(field: "output", "must name a file")
        }
        if first.elementsEqual("results".utf8) || first.elementsEqual("runs".utf8) || parts.contains(where: { $0.first == dot }) {
            throw JobSpecError(field: "output", "must not point into results/, runs/ or a hidden name")
        }
        if bytes.last == slash || last.count > 255 {
            throw JobSpecError(field: "output", "must name a file")
        }
        return String(decoding: Array(parts.joined(separator: [slash])), as: UTF8.self)
    }
}
