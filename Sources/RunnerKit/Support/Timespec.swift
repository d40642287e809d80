import Glibc

extension timespec {
    /// Whole seconds since 1970 (a file's mtime, say).
    var wholeSeconds: Int { Int(tv_sec) }
}
