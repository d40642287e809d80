import Foundation
import Glibc

extension RequestConfig {
    /// The environment variable naming the config file when `--config` does not.
    package static let environmentVariable = "RUNNER_CONFIG"

    /// A config file that cannot be used, in one line naming the file and the field.
    package struct FileError: Error, Sendable, CustomStringConvertible {
        package var description: String
        init(_ path: String, _ field: String?, _ problem: String) {
            description = "config \(path): " + (field.map { "field '\($0)' " } ?? "") + problem
        }
    }

    static let topFields = ["userAgent", "kinds", "hosts"]
    static let hostFields = ["headers", "rate", "perHost", "limitRate", "cacert", "cert", "key"]

    /// Reads a config file: `{"userAgent", "kinds": [dirs], "hosts": {"<host, *.suffix or
    /// address, with an optional :port>": {"headers", "rate", "perHost", "limitRate", "cacert", "cert", "key"}}}`.
    ///
    /// Unknown and mistyped fields are refused by name, as in job files. Relative paths (kind
    /// folders, TLS files, `{file:}` references) are resolved against the config file's folder.
    /// Header references must expand now (checked and forgotten) unless `checkingSecrets` is
    /// false (`submit`: the watcher's environment is not the submitter's); TLS files must be readable.
    package init(
        contentsOf path: String, environment: [String: String] = ProcessInfo.processInfo.environment, checkingSecrets: Bool = true
    ) throws(FileError) {
        // Read as job files are: through a symbolic link too (a mounted ConfigMap is one).
        guard let data = FileManager.default.contents(atPath: path) else {
            throw FileError(path, nil, FileManager.default.fileExists(atPath: path) ? "cannot be read" : "does not exist")
        }
        let document: JSONValue
        do {
            document = try JSONParser.parse([UInt8](data))
        } catch {
            throw FileError(path, nil, "is not valid JSON: \(error)")
        }
        guard case .object(let members) = document else {
            throw FileError(path, nil, "must be a JSON object, not \(document.typeDescription)")
        }
        let folder = Self.folder(of: path)
        self.init()
        for (name, value) in members {
            switch name {
            case "userAgent":
                guard case .string(let agent) = value, !agent.isEmpty, !agent.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
                    throw FileError(path, name, "must be a non-empty string of one line, not \(value.typeDescription)")
                }
                userAgent = agent
            case "kinds":
                guard case .array(let items) = value else { throw FileError(path, name, "must be a list of folders, not \(value.typeDescription)") }
                for item in items {
                    guard case .string(let dir) = item, !dir.isEmpty else {
                        throw FileError(path, name, "must be a list of folders, not \(item.typeDescription)")
                    }
                    kinds.append(Self.resolve(dir, in: folder))
                }
            case "hosts":
                guard case .object(let entries) = value else {
                    throw FileError(path, name, "must be an object of host patterns, not \(value.typeDescription)")
                }
                for (key, entry) in entries {
                    let (pattern, port) = try Self.hostEntry(key, path: path)
                    var settings = try Self.hostSettings(
                        entry, field: "hosts.\(key)", path: path, folder: folder, environment: checkingSecrets ? environment : nil)
                    if port != nil, settings.rate != nil || settings.perHost != nil || settings.limitRate != nil {
                        throw FileError(
                            path, "hosts.\(key)",
                            "rate, perHost and limitRate count per host, whatever the port: set them on an entry without ':port'")
                    }
                    settings.port = port
                    hosts.append((pattern, settings))
                }
            default:
                throw FileError(path, name, "is not a field of a config (fields: \(Self.topFields.joined(separator: ", ")))")
            }
        }
    }

    /// The forms a `hosts` entry may take, for messages.
    static let hostForms = "a host name, '*.suffix' or an IP address, each with an optional ':port' (api.example.com, *.example.com, 192.0.2.7, [2001:db8::1]:8443)"

    /// A `hosts` key: a host name, `*.suffix` or an address, with an optional `:port` (an IPv6
    /// address with a port in brackets). Without a port the entry covers every port.
    static func hostEntry(_ key: String, path: String) throws(FileError) -> (HostPattern, Int?) {
        var host = Substring(key)
        var port: Int?
        if key.hasPrefix("["), let close = key.firstIndex(of: "]") {
            let after = key[key.index(after: close)...]
            host = key[key.index(after: key.startIndex)..<close]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw FileError(path, "hosts", "'\(key)': use \(hostForms)") }
                port = try portNumber(after.dropFirst(), key: key, path: path)
            }
        } else if let colon = key.firstIndex(of: ":"), key[key.index(after: colon)...].allSatisfy({ $0 != ":" }) {
            host = key[..<colon]
            port = try portNumber(key[key.index(after: colon)...], key: key, path: path)
        }
        guard !host.contains("/"), let pattern = try? HostPattern(parsing: String(host)) else {
            let why = host.contains("/") ? " (hosts are matched by the URL's host, not by network)" : ""
            throw FileError(path, "hosts", "'\(key)': use \(hostForms)\(why)")
        }
        return (pattern, port)
    }

    private static func portNumber(_ text: Substring, key: String, path: String) throws(FileError) -> Int {
        guard !text.isEmpty, text.utf8.count <= 5, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
            let port = Int(text), (1...65535).contains(port)
        else {
            throw FileError(path, "hosts", "'\(key)': the port must be a number from 1 to 65535")
        }
        return port
    }

    private static func hostSettings(
        _ value: JSONValue, field: String, path: String, folder: String, environment: [String: String]?
    ) throws(FileError) -> HostSettings {
        guard case .object(let members) = value else {
            throw FileError(path, field, "must be an object, not \(value.typeDescription)")
        }
        var settings = HostSettings()
        for (name, item) in members {
            let where_ = "\(field).\(name)"
            switch name {
            case "headers":
                do {
                    settings.headers = try HeaderTemplate.templates(item, field: where_, folder: folder)
                    if let environment {
                        for header in settings.headers { try header.check(environment: environment) }
                    }
                } catch let error as JobSpecError {
                    throw FileError(path, nil, error.description)
                } catch let problem as HeaderTemplate.Problem {
                    throw FileError(path, where_, problem.description)
                } catch {
                    throw FileError(path, where_, "\(error)")
                }
            case "rate":
                guard case .number(let rate) = item, rate.isFinite, rate > 0, rate <= 100_000 else {
                    throw FileError(path, where_, "must be a number of requests per second greater than 0 (at most 100000), not \(item.typeDescription)")
                }
                settings.rate = rate
            case "limitRate":
                let rate: Int?
                switch item {
                case .string(let text): rate = ByteRate.parse(text)
                case .number(let number): rate = number.isFinite && number >= 1 && number <= Double(Int.max / 2) ? Int(number) : nil
                default: rate = nil
                }
                guard let rate else {
                    throw FileError(path, where_, "must be bytes a second: a number, or a string with K, M or G after it for 1024s (\"500K\", \"2M\")")
                }
                settings.limitRate = rate
            case "perHost":
                guard let count = item.intValue, (1...10_000).contains(count) else {
                    throw FileError(path, where_, "must be a whole number from 1 to 10000")
                }
                settings.perHost = count
            case "cacert", "cert", "key":
                guard case .string(let file) = item, !file.isEmpty else {
                    throw FileError(path, where_, "must be the path of a PEM file, not \(item.typeDescription)")
                }
                let resolved = resolve(file, in: folder)
                guard access(resolved, R_OK) == 0 else {
                    throw FileError(path, where_, "cannot read \(resolved): \(String(cString: strerror(errno)))")
                }
                switch name {
                case "cacert": settings.cacert = resolved
                case "cert": settings.cert = resolved
                default: settings.key = resolved
                }
            default:
                throw FileError(path, where_, "is not a field of a host (fields: \(hostFields.joined(separator: ", ")))")
            }
        }
        if settings.key != nil && settings.cert == nil {
            throw FileError(path, "\(field).key", "needs a 'cert' beside it")
        }
        return settings
    }

    /// Adds what a config file sets (`userAgent`, `kinds`, `hosts`) to this one, whose `rate` and
    /// `cacert` come from the command line.
    package mutating func merge(_ file: RequestConfig) {
        if let agent = file.userAgent { userAgent = agent }
        kinds += file.kinds
        hosts += file.hosts
    }

    static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return FileManager.default.currentDirectoryPath }
        let folder = String(path[..<slash])
        if folder.isEmpty { return "/" }
        return folder.hasPrefix("/") ? folder : FileManager.default.currentDirectoryPath + "/" + folder
    }

    static func resolve(_ path: String, in folder: String) -> String {
        path.hasPrefix("/") ? path : folder + "/" + path
    }
}
