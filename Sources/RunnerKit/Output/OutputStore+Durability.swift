import Glibc

extension OutputStore {
    /// Makes everything written under the output directory durable (one `syncfs` of its file
    /// system): what `runner run` does before it lets go of the run lock, and the watcher before
    /// a file moves to done/.
    package func synchronize() throws(Durability.Failure) {
        try Durability.syncFileSystem(of: root)
    }

    /// Removes the temporary files that crashed runners left anywhere under the output directory.
    @discardableResult
    package func sweepLeftovers() -> Int {
        Durability.sweepLeftovers(in: root, depth: 16)
    }
}
