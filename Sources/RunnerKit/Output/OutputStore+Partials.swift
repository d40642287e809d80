import Synchronization
import Glibc

extension OutputStore {
    /// What a store that lists sidecars knows of one folder's.
    enum SidecarsKnown: Equatable {
        /// Looked at this many times, each on disk: a short run in a large folder never reads it.
        case looked(Int)
        /// The kept partials with a sidecar in the folder (the partials' names), read once and
        /// kept up to date with the sidecars written since.
        case listed(Set<String>)
    }

    /// How many looks for a sidecar in one folder go to the disk before the folder's names are
    /// read once instead.
    static let sidecarLooksBeforeListing = 64

    /// From now on, which sidecars of kept partials a payload folder holds is read once, when
    /// jobs looked there `sidecarLooksBeforeListing` times, and kept up to date with the
    /// sidecars this process writes: a job with none (nearly all) then makes no system call to
    /// find it has none, and a short run in a large folder never reads it. Only for a store no
    /// other process writes meanwhile (`runner run` holds the output's lock), and to which no
    /// other store object of this process writes sidecars.
    package func listsSidecars() {
        sidecars.withLock { $0 = $0 ?? [:] }
    }

    /// Whether `folder` (relative) may hold the sidecar of the partial `name`: always when
    /// sidecars are not listed, nor yet for this folder; else whether the folder's list has it.
    func mayHoldSidecar(ofPartial name: String, in folder: String) -> Bool {
        sidecars.withLock { known in
            guard known != nil else { return true }
            switch known![folder] ?? .looked(0) {
            case .listed(let names):
                return names.contains(name)
            case .looked(let looks) where looks + 1 < Self.sidecarLooksBeforeListing:
                known![folder] = .looked(looks + 1)
                return true
            case .looked:
                // Read under the lock: a sidecar written meanwhile is added once the list is kept.
                let names = Set(
                    FolderReader.names(in: folder.isEmpty ? root : absolute(folder)).lazy.filter {
                        $0.hasPrefix(PartialDownload.prefix) && $0.hasSuffix(".json")
                    }.map { String($0.dropLast(5)) })
                known![folder] = .listed(names)
                return names.contains(name)
            }
        }
    }

    /// The sidecar of the partial `name` was written in `folder`: later looks find it.
    func sidecarWritten(ofPartial name: String, in folder: String) {
        sidecars.withLock { known in
            // A folder not listed yet is looked at on disk, or read when listed, which finds it.
            if case .listed(var names)? = known?[folder] {
                names.insert(name)
                known![folder] = .listed(names)
            }
        }
    }

    /// A kept partial of a cut transfer (`.partial-…`, not its sidecar): where, how large, when
    /// last written.
    struct KeptPartial {
        var path: String
        var size: Int
        /// Last written, in milliseconds since 1970.
        var writtenAt: Int64
        var sidecarPath: String { path + ".json" }
    }

    /// Every kept partial of the output directory (sidecars aside), whatever its folder.
    func keptPartials() -> [KeptPartial] {
        var found: [KeptPartial] = []
        forEachPayloadFolder { folder in
            for name in folder.files where name.hasPrefix(PartialDownload.prefix) && !name.hasSuffix(".json") {
                var info = stat()
                guard fstatat(folder.fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
                found.append(KeptPartial(path: folder.path(of: name), size: Int(info.st_size), writtenAt: info.st_mtim.milliseconds))
            }
        }
        return found
    }

    /// Keeps the bytes of the kept partials within `partialBudget`: while they are over it, the
    /// oldest (by when last written) go with their sidecars, the one just kept included if it
    /// alone is over it. A partial another attempt is writing (locked) stays, and counts.
    /// Returns the relative paths removed. Reads the whole output's folders: called only when a
    /// cut body was kept.
    @discardableResult
    func trimPartials() -> [String] {
        let budget = partialBudget.load(ordering: .relaxed)
        var partials = keptPartials()
        var total = partials.reduce(0) { $0 + $1.size }
        guard total > budget else { return [] }
        partials.sort { ($0.writtenAt, $0.path) < ($1.writtenAt, $1.path) }
        var removed: [String] = []
        for partial in partials where total > budget {
            guard removeIdlePartial(partial.path) else { continue }
            total -= partial.size
            removed.append(partial.path)
        }
        return removed
    }

    /// Removes a partial and its sidecar unless an attempt is writing it (holds its lock): the
    /// lock is taken for the removal, so no attempt takes it meanwhile. `dryRun`: only says
    /// whether it would. `path` is relative to the output; its folder is opened from the root's
    /// descriptor without following a link.
    func removeIdlePartial(_ path: String, dryRun: Bool = false) -> Bool {
        guard let folder = try? openFolder(Self.folder(of: path)) else { return false }
        return removeIdlePartial(in: folder.fd, name: String(path.split(separator: "/").last ?? ""), dryRun: dryRun)
    }

    /// `removeIdlePartial`, for the partial `name` in the folder open as `folderFD` (what
    /// `prune` removes through the descriptor of the folder it listed): nothing is looked up
    /// again from the output's root.
    func removeIdlePartial(in folderFD: Int32, name: String, dryRun: Bool = false) -> Bool {
        guard !name.isEmpty else { return false }
        let fd = name.withCString { openat(folderFD, $0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY) }
        if fd >= 0 {
            defer { close(fd) }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return false }
            var held = stat()
            var named = stat()
            guard fstat(fd, &held) == 0, fstatat(folderFD, name, &named, AT_SYMLINK_NOFOLLOW) == 0, held.st_ino == named.st_ino else { return false }
            if dryRun { return true }
            unlinkat(folderFD, name + ".json", 0)
            return unlinkat(folderFD, name, 0) == 0
        }
        guard errno == ENOENT else { return false }
        if !dryRun { unlinkat(folderFD, name + ".json", 0) }
        return true
    }

    /// Whether the kept partial at `path` can no longer be of use: its sidecar names a key whose
    /// last record is final (succeeded, notModified, notFound) and finished after the partial
    /// was last written, so that body was had, or found current or gone, since.
    func partialIsOutdated(_ partial: KeptPartial) -> Bool {
        guard let bytes = Self.readFile(in: AT_FDCWD, absolute(partial.sidecarPath)),
            let key = (try? JSONParser.parse(bytes))?["key"]?.stringValue,
            let record = readRecord(forKey: key), record["key"]?.stringValue == key,
            let status = record["status"]?.stringValue, Self.finalStatuses.contains(status),
            let finished = record["finishedAt"]?.stringValue.flatMap(Timestamp.milliseconds)
        else { return false }
        return finished > partial.writtenAt
    }

    /// The statuses after which a key's kept bytes are of no use.
    static let finalStatuses: Set<String> = [JobStatus.succeeded.rawValue, JobStatus.notModified.rawValue, JobStatus.notFound.rawValue]
}
