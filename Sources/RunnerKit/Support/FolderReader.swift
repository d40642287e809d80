import Glibc

/// Reads a folder's entries with `readdir`, each name read in place.
///
/// `readdir` hands out entries packed into one buffer, each only `d_reclen` bytes long: the C
/// library promises nothing past the name's NUL. Copying `d_name` as the fixed 256-byte field it
/// is declared as (or loading the whole `dirent`) reads past an entry near the end of the buffer,
/// into memory that may not be mapped. So the name is measured with `strlen` where it lies, and
/// the type is loaded as its single byte; every place that reads a folder goes through here.
enum FolderReader {
    /// One entry, valid only inside the body it is handed to.
    struct Entry {
        /// The name's bytes, without the NUL.
        let bytes: UnsafeRawBufferPointer
        /// `d_type`: `DT_DIR`, `DT_REG`, `DT_LNK`, or `DT_UNKNOWN` where the file system does not say.
        let type: UInt8

        /// The name, if it is UTF-8.
        var name: String? { String(validating: bytes, as: UTF8.self) }
        var isDirectory: Bool { type == UInt8(DT_DIR) }
    }

    private static let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
    private static let typeOffset = MemoryLayout<dirent>.offset(of: \dirent.d_type)!

    /// Calls `body` for each entry of `folder` but `.` and `..`; false when the folder cannot be
    /// opened.
    @discardableResult
    static func forEachEntry(in folder: String, _ body: (Entry) throws -> Void) rethrows -> Bool {
        guard let directory = opendir(folder) else { return false }
        defer { closedir(directory) }
        return try forEachEntry(of: directory, body)
    }

    /// Calls `body` for each entry of the folder open as `folder` (a descriptor, which stays
    /// open and unmoved: the folder is read through a descriptor of its own); false when it
    /// cannot be read.
    @discardableResult
    static func forEachEntry(inFolder folder: Int32, _ body: (Entry) throws -> Void) rethrows -> Bool {
        let fd = openat(folder, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        guard let directory = fdopendir(fd) else {
            close(fd)
            return false
        }
        defer { closedir(directory) }
        return try forEachEntry(of: directory, body)
    }

    private static func forEachEntry(of directory: OpaquePointer, _ body: (Entry) throws -> Void) rethrows -> Bool {
        while let entry = readdir(directory) {
            let base = UnsafeRawPointer(entry)
            let name = base + nameOffset
            let bytes = UnsafeRawBufferPointer(start: name, count: strlen(name.assumingMemoryBound(to: CChar.self)))
            if bytes.count == 1 && bytes[0] == UInt8(ascii: ".") { continue }
            if bytes.count == 2 && bytes[0] == UInt8(ascii: ".") && bytes[1] == UInt8(ascii: ".") { continue }
            try body(Entry(bytes: bytes, type: base.load(fromByteOffset: typeOffset, as: UInt8.self)))
        }
        return true
    }

    /// The UTF-8 names in `folder` (`.` and `..` left out); empty when it cannot be read. A name
    /// that is not UTF-8 is left out, and handed to `notUTF8` as its bytes.
    static func names(in folder: String, notUTF8: (([UInt8]) -> Void)? = nil) -> [String] {
        var names: [String] = []
        forEachEntry(in: folder) { entry in
            if let name = entry.name {
                names.append(name)
            } else {
                notUTF8?(Array(entry.bytes))
            }
        }
        return names
    }
}
