import Foundation

extension OutputStore {
    /// An `output` must stay inside the output directory and out of its bookkeeping folders.
    ///
    /// The path is read as the file system reads it, byte by byte between `/` bytes: as Swift
    /// characters, a combining mark after a `/` would hide it (`x\u{600}/../y` would seem to
    /// have no `..` part).
    package static func validateOutput(_ path: String) throws(JobSpecError) -> String {
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

    /// The absolute path of a record's `output`, or why it does not lie inside the output.
    ///
    /// A record that reaches a hook may have been read back (the records a dead watcher left, a
    /// row of the queue), so its `output` is checked as a job's is, and then walked folder by
    /// folder from the output's root without following a link: a path that climbs out, or
    /// passes through a link (a neighbour's, planted in a shared output), gives the hook no path.
    package func confined(recordOutput output: String) -> Result<String, ConfinementError> {
        let normalized: String
        do {
            normalized = try Self.validateOutput(output)
        } catch {
            return .failure(ConfinementError(description: "its output \(Printable.escaped(output)) \(error.message)"))
        }
        let parts = normalized.split(separator: "/")
        var fd = dup(rootFolder.fd)
        guard fd >= 0 else { return .failure(ConfinementError(description: "the output folder cannot be opened")) }
        defer { close(fd) }
        for part in parts.dropLast() {
            let next = String(part).withCString { openat(fd, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            guard next >= 0 else {
                if errno == ENOENT { return .success(root + "/" + normalized) }  // nothing there: nothing to read
                return .failure(ConfinementError(description: "its output \(Printable.escaped(output)) passes through something that is not a folder (a link?)"))
            }
            close(fd)
            fd = next
        }
        var info = stat()
        if String(parts.last!).withCString({ fstatat(fd, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0, (info.st_mode & S_IFMT) == S_IFLNK {
            return .failure(ConfinementError(description: "its output \(Printable.escaped(output)) is a symbolic link"))
        }
        return .success(root + "/" + normalized)
    }

    /// Why a record's `output` was not given to a hook.
    package struct ConfinementError: Error, CustomStringConvertible, Sendable {
        package var description: String
    }
}
