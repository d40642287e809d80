import Foundation
import Glibc

/// A tmpfs of 2 MiB, mounted for one test (root only) and always unmounted.
public final class SmallDisk {
    public let path: String

    /// Whether this process may mount a tmpfs (root, and not refused by the kernel).
    public static let available: Bool = {
        guard getuid() == 0 else { return false }
        guard let probe = try? SmallDisk(at: FileManager.default.temporaryDirectory.path + "/runner-probe-\(getpid())") else {
            return false
        }
        probe.unmount()
        return true
    }()

    public struct MountFailed: Error, CustomStringConvertible {
        public var description: String
    }

    public init(at path: String, size: String = "2m") throws {
        self.path = path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard mount("tmpfs", path, "tmpfs", 0, "size=\(size),mode=0755") == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(atPath: path)
            throw MountFailed(description: "cannot mount a tmpfs at \(path): \(reason)")
        }
    }

    public func unmount() {
        _ = umount2(path, Int32(MNT_DETACH))
        rmdir(path)
    }
}
