import Foundation
import Glibc

/// A request header whose value may hold secret references: `{env:NAME}` (an environment
/// variable) and `{file:PATH}` (a file's content, one trailing newline dropped).
///
/// References are expanded only when a request is made, so a secret's value is held by nothing
/// that outlives the request: not the job, not a record, not an error message (errors name the
/// variable or the file, never what it holds). Any other `{…}` is text.
public struct HeaderTemplate: Sendable, Equatable {
    /// The header's name, an HTTP token (checked when the template is made).
    public private(set) var name: String
    /// The value as written, references unexpanded.
    public private(set) var value: String
    private var parts: [Part]

    enum Part: Sendable, Equatable {
        case text(String)
        case environment(String)
        case file(String)
    }

    /// Why a header cannot be made or expanded, naming the header and the variable or file.
    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        /// The name of the header at fault; never its value.
        public var header: String
        /// What is wrong, naming the variable or the file, never what it holds.
        public var reason: String
        public var description: String { "\(header): \(reason)" }
    }

    /// The largest file a `{file:PATH}` reference may read (response headers are bounded too).
    static let maxFileBytes = 64 * 1024

    /// Reads `value`'s references; refuses a name that is not an HTTP token, a value with a line
    /// break or NUL, and a reference without a name or path. Relative `{file:}` paths are
    /// resolved against `folder` when given (a config file's folder), else the working directory.
    public init(name: String, value: String, folder: String? = nil) throws(Problem) {
        guard !name.isEmpty, name.utf8.allSatisfy(Self.isTokenByte) else {
            throw Problem(header: name, reason: "is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only)")
        }
        self.name = name
        self.value = value
        self.parts = try Self.parse(value, header: name, folder: folder)
    }

    /// The environment variables and files the value refers to, for messages and checks.
    package var references: [String] {
        parts.compactMap { part in
            switch part {
            case .text: return nil
            case .environment(let variable): return "{env:\(variable)}"
            case .file(let path): return "{file:\(path)}"
            }
        }
    }

    /// Whether every reference can be expanded now (the variable is set, the file readable and
    /// one line); throws the first problem. Expands and forgets: nothing is kept.
    package func check(environment: [String: String] = ProcessInfo.processInfo.environment) throws(Problem) {
        _ = try expand(environment: environment)
    }

    /// The value with its references expanded.
    package func expand(environment: [String: String] = ProcessInfo.processInfo.environment) throws(Problem) -> String {
        if case .text(let text)? = parts.first, parts.count == 1 { return text }
        var result = ""
        for part in parts {
            switch part {
            case .text(let text):
                result += text
            case .environment(let variable):
                guard let secret = environment[variable] else {
                    throw Problem(header: name, reason: "the environment variable \(variable) is not set")
                }
                // An empty secret would send a header that authenticates nobody: as good as unset.
                guard !secret.isEmpty else {
                    throw Problem(header: name, reason: "the environment variable \(variable) is set but empty")
                }
                guard !Self.hasLineBreak(secret) else {
                    throw Problem(header: name, reason: "the environment variable \(variable) holds a line break or NUL")
                }
                result += secret
            case .file(let path):
                result += try Self.read(path, header: name)
            }
        }
        return result
    }

    // MARK: - Reading

    private static func parse(_ value: String, header: String, folder: String?) throws(Problem) -> [Part] {
        guard !hasLineBreak(value) else {
            throw Problem(header: header, reason: "the value holds a line break or NUL")
        }
        guard value.contains("{env:") || value.contains("{file:") else { return [.text(value)] }
        var parts: [Part] = []
        var text = ""
        let isReference = { (inside: Substring) -> Substring? in
            inside.hasPrefix("env:") || inside.hasPrefix("file:") ? inside : nil
        }
        try TemplateScanner.scan(value, read: isReference) { piece throws(Problem) in
            switch piece {
            case .text(let part):
                text += part
            case .strayClose:
                text += "}"
            case .unclosed(let rest):
                let opened = ["env", "file"].compactMap { kind in rest.range(of: "{\(kind):").map { (kind, $0.lowerBound) } }
                if let first = opened.min(by: { $0.1 < $1.1 }) {
                    throw Problem(header: header, reason: "the reference {\(first.0):… has no closing '}'")
                }
                text += rest
            case .placeholder(let inside):
                if !text.isEmpty { parts.append(.text(text)) }
                text = ""
                parts.append(try Self.reference(inside, header: header, folder: folder))
            }
        }
        if !text.isEmpty { parts.append(.text(text)) }
        return parts
    }

    /// `env:NAME` or `file:PATH`, as found between a reference's braces.
    private static func reference(_ inside: Substring, header: String, folder: String?) throws(Problem) -> Part {
        if inside.hasPrefix("env:") {
            let variable = inside.dropFirst(4)
            guard let first = variable.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first),
                variable.utf8.allSatisfy({ isAlphanumeric($0) || $0 == UInt8(ascii: "_") })
            else {
                throw Problem(header: header, reason: "'{\(inside)}' does not name an environment variable (letters, digits and _)")
            }
            return .environment(String(variable))
        }
        var path = String(inside.dropFirst(5))
        guard !path.isEmpty else { throw Problem(header: header, reason: "'{file:}' names no file") }
        if !path.hasPrefix("/"), let folder { path = folder + "/" + path }
        return .file(path)
    }

    /// A file's content, one trailing newline (LF or CRLF) dropped; it must be one line.
    private static func read(_ path: String, header: String) throws(Problem) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else {
            throw Problem(header: header, reason: "cannot read the file \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw Problem(header: header, reason: "cannot read the file \(path): it is not a regular file")
        }
        var bytes = [UInt8](repeating: 0, count: maxFileBytes + 1)
        var count = 0
        while count < bytes.count {
            let got = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if got < 0, errno == EINTR { continue }
            guard got >= 0 else {
                throw Problem(header: header, reason: "cannot read the file \(path): \(String(cString: strerror(errno)))")
            }
            if got == 0 { break }
            count += got
        }
        guard count <= maxFileBytes else {
            throw Problem(header: header, reason: "the file \(path) is larger than \(maxFileBytes / 1024) KiB")
        }
        if count > 0, bytes[count - 1] == UInt8(ascii: "\n") {
            count -= 1
            if count > 0, bytes[count - 1] == UInt8(ascii: "\r") { count -= 1 }
        }
        let secret = String(decoding: bytes[..<count], as: UTF8.self)
        guard !hasLineBreak(secret) else {
            throw Problem(header: header, reason: "the file \(path) holds more than one line (or a NUL)")
        }
        return secret
    }

    private static func hasLineBreak(_ text: String) -> Bool {
        text.utf8.contains { $0 == 0x0A || $0 == 0x0D || $0 == 0 }
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    /// RFC 9110's `tchar`.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        isAlphanumeric(byte) || "!#$%&'*+-.^_`|~".utf8.contains(byte)
    }
}

extension HeaderTemplate {
    /// An object of header names and string values, as in a job's `headers` or the config's.
    package static func templates(_ value: JSONValue, field: String, folder: String? = nil) throws(JobSpecError) -> [HeaderTemplate] {
        guard case .object(let members) = value else {
            throw JobSpecError(field: field, "must be an object of header names and string values, not \(value.typeDescription)")
        }
        var headers: [HeaderTemplate] = []
        for (name, item) in members {
            guard case .string(let text) = item else {
                throw JobSpecError(field: field, "\(name): must be a string, not \(item.typeDescription)")
            }
            do {
                headers.append(try Self(name: name, value: text, folder: folder))
            } catch {
                throw JobSpecError(field: field, error.description)
            }
        }
        return headers
    }
}
