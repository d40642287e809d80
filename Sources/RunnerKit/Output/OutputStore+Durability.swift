import Glibc

extension OutputStore {
    /// Makes everything written under the output directory durable (one `syncfs` of its file
    /// system): what `runner run` does before it lets go of the run lock, and the watcher before
    /// a file moves to done/.
    public func synchronize() throws(Durability.Failure) {
        try Durability.syncFileSystem(of: root)
    }

    /// Removes the temporary files that crashed runners left anywhere under the output directory.
    @discardableResult
    public func sweepLeftovers() -> Int {
        Durability.sweepLeftovers(in: root, depth: 16)
    }

    /// Whether `relativePath` is a regular file of `bytes` bytes (any size when nil). A record
    /// whose payload is not (a power loss can leave a record whose payload came back empty) must
    /// not lend its validators to the next request, or a 304 would keep the broken file forever.
    public func holdsPayload(_ relativePath: String, bytes: Int?) -> Bool {
        var info = stat()
        guard lstat(absolute(relativePath), &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return false }
        return bytes.map { Int(info.st_size) == $0 } ?? true
    }
}
