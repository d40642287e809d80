import Foundation
import Glibc
import RunnerKit

/// A kind read from a file: declarative (what to fetch, check, record and fan out
/// to) or executable (`exec`: a program does the checking, or the whole operation).
package struct KindFile: Sendable {
    /// The largest kind file read, in bytes.
    package static let maxFileBytes = 1 << 20
    /// How deep a child job template may nest objects and arrays.
    package static let maxTemplateDepth = 8
    /// The most fields (at all depths) of a child job template, details or parameters.
    package static let maxEntries = 256

    /// What the payload must be.
    package enum PayloadRule: Sendable {
        /// JSON: `object`, `array` or `any`, with pointers that must name something.
        case json(shape: String, require: [JSONPointer])
        case image([ImageFormat])
        case text
        case bytes
    }

    /// A `details` entry: the value a pointer names, or the size of the array or object it names.
    package enum Detail: Sendable {
        case value(JSONPointer)
        case count(JSONPointer)
    }

    /// A child job template: its strings are templates; other values are copied.
    package indirect enum JobTemplate: Sendable {
        case template(KindTemplate)
        case value(JSONValue)
        case object([(key: String, value: JobTemplate)])
        case array([JobTemplate])

        /// The `{name}` parameters of every template inside.
        var parameterNames: [String] {
            switch self {
            case .template(let template): return template.parameterNames
            case .value: return []
            case .object(let members): return members.flatMap(\.value.parameterNames)
            case .array(let items): return items.flatMap(\.parameterNames)
            }
        }

        /// The text of a template without placeholders (a kind written as is); nil otherwise.
        var literal: String? {
            guard case .template(let template) = self, template.parameterNames.isEmpty, !template.hasPointers else { return nil }
            return template.segments.map { if case .literal(let text) = $0 { text } else { "" } }.joined()
        }
    }

    package var name: String
    package var summary: String
    package var path: String
    package var parameters: [KindParameter]
    package var key: KindTemplate?
    package var accept: String?
    package var payload: PayloadRule
    package var contentTypes: [String]?
    package var folder: String
    package var fileExtension: String
    package var details: [(name: String, detail: Detail)]
    package var children: (each: JSONPointer, job: [(key: String, value: JobTemplate)])?
    /// The program and its arguments, for an executable kind.
    package var exec: [String]?
    /// Whether the runner fetches the URL first (executable kinds only; declarative always do).
    package var fetch: Bool

    /// The folder of the kind file: an executable kind's working directory.
    package var directory: String { (path as NSString).deletingLastPathComponent }

    static let fieldNames: Set<String> = [
        "kind", "summary", "parameters", "key", "accept", "payload", "folder", "extension", "details", "children",
        "exec", "fetch",
    ]

    /// Reads and checks a kind file; errors name the file and the field.
    package static func read(path: String) throws(JobFileError) -> KindFile {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw JobFileError(file: path, "cannot be read")
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: maxFileBytes + 1)) ?? Data()
        guard data.count <= maxFileBytes else {
            throw JobFileError(file: path, "is larger than \(maxFileBytes) bytes, too large for a kind file")
        }
        let stem = ((path as NSString).lastPathComponent as NSString).deletingPathExtension
        do {
            return try decode([UInt8](data), path: path, fileStem: stem)
        } catch {
            throw JobFileError(file: path, location: .file, problem: error)
        }
    }

    /// Decodes a kind file's bytes. `fileStem`: the file's name without `.json`, which must be the kind's name.
    package static func decode(_ bytes: [UInt8], path: String, fileStem: String?) throws(JobSpecError) -> KindFile {
        do {
            return try decodeFields(bytes, path: path, fileStem: fileStem)
        } catch {
            // Names and templates come from the file: one line, and not a page of it.
            throw JobSpecError(field: error.field.map(oneLine), oneLine(error.message))
        }
    }

    private static func oneLine(_ text: String) -> String {
        var line = text.replacingOccurrences(of: "\n", with: "\\n").replacingOccurrences(of: "\r", with: "\\r")
        if line.count > 300 { line = String(line.prefix(300)) + "…" }
        return line
    }

    private static func decodeFields(_ bytes: [UInt8], path: String, fileStem: String?) throws(JobSpecError) -> KindFile {
        let document: JSONValue
        do {
            document = try JSONParser.parse(bytes)
        } catch {
            throw JobSpecError(field: nil, "is not valid JSON: \(error)")
        }
        guard case .object(let members) = document else {
            throw JobSpecError(field: nil, "must hold one JSON object, not \(document.typeDescription)")
        }
        var seen = Set<String>()
        for (key, _) in members {
            guard fieldNames.contains(key) else { throw JobSpecError(field: key, "is not a field of a kind file") }
            guard seen.insert(key).inserted else { throw JobSpecError(field: key, "appears twice") }
        }
        let name = try string(document, "kind", required: true)!
        guard name.utf8.count <= 64, !name.isEmpty,
            name.allSatisfy({ ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "-" || $0 == "_" || $0 == "." }),
            name.first != "."
        else {
            throw JobSpecError(field: "kind", "must be 1 to 64 letters, digits, '-', '_' or '.', not '\(name)'")
        }
        if let fileStem, fileStem != name {
            throw JobSpecError(field: "kind", "is '\(name)', but the file is named \(fileStem).json: a kind file is <kind>.json")
        }
        let summary = try string(document, "summary", required: false) ?? ""
        let parameters = try decodeParameters(document["parameters"])
        let names = Set(parameters.map(\.name))

        var key: KindTemplate?
        if let text = try string(document, "key", required: false) {
            key = try template(text, field: "key")
            if key!.hasPointers { throw JobSpecError(field: "key", "may use parameters only, not JSON Pointers") }
            for parameter in key!.parameterNames where !names.contains(parameter) {
                throw JobSpecError(field: "key", "uses {\(parameter)}, which is not a parameter of the kind")
            }
            for parameter in key!.parameterNames where !(parameters.first { $0.name == parameter }!.required || parameters.first { $0.name == parameter }!.defaultValue != nil) {
                throw JobSpecError(field: "key", "uses {\(parameter)}, which is neither required nor has a default")
            }
        }
        let accept = try string(document, "accept", required: false)
        if let accept, accept.contains(where: { $0 == "\r" || $0 == "\n" }) || accept.utf8.count > 1024 {
            throw JobSpecError(field: "accept", "must be one header line of at most 1024 bytes")
        }
        let exec = try decodeExec(document["exec"])
        let fetch: Bool
        switch document["fetch"] {
        case nil, .null?: fetch = true
        case .bool(let b)?: fetch = b
        case let other?: throw JobSpecError(field: "fetch", "must be true or false, not \(other.typeDescription)")
        }
        if !fetch && exec == nil { throw JobSpecError(field: "fetch", "can be false only for an executable kind (with 'exec')") }

        let (rule, contentTypes) = try decodePayload(document["payload"])
        if exec != nil && document["payload"] != nil {
            throw JobSpecError(field: "payload", "belongs to declarative kinds; an executable kind checks the payload in its program")
        }
        var fileExtension = try string(document, "extension", required: false)
        if fileExtension == nil {
            if case .json = rule, exec == nil { fileExtension = "json" } else { fileExtension = "bin" }
        }
        guard let ext = fileExtension, !ext.isEmpty, ext.utf8.count <= 16, ext.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw JobSpecError(field: "extension", "must be 1 to 16 ASCII letters or digits")
        }
        let folder = try string(document, "folder", required: false) ?? name
        do {
            _ = try OutputStore.validateOutput("\(folder)/x")
        } catch {
            throw JobSpecError(field: "folder", "must be a relative folder inside the output directory")
        }

        let details = try decodeDetails(document["details"])
        let children = try decodeChildren(document["children"])
        if let children {
            for (key, template) in children.job {
                for parameter in template.parameterNames where !names.contains(parameter) {
                    throw JobSpecError(field: "children.job.\(key)", "uses {\(parameter)}, which is not a parameter of the kind")
                }
            }
        }
        if exec != nil && (!details.isEmpty || children != nil) {
            throw JobSpecError(field: details.isEmpty ? "children" : "details", "belongs to declarative kinds; an executable kind's program answers them")
        }
        if !details.isEmpty || children != nil {
            guard case .json = rule else {
                throw JobSpecError(field: details.isEmpty ? "children" : "details", "needs a JSON payload (\"payload\": {\"json\": …})")
            }
        }
        return KindFile(
            name: name, summary: summary, path: path, parameters: parameters, key: key, accept: accept, payload: rule,
            contentTypes: contentTypes, folder: folder, fileExtension: ext, details: details, children: children,
            exec: exec, fetch: fetch)
    }

    // MARK: - Fields

    private static func string(_ document: JSONValue, _ field: String, required: Bool) throws(JobSpecError) -> String? {
        switch document[field] {
        case nil, .null?:
            if required { throw JobSpecError(field: field, "is missing") }
            return nil
        case .string(let s)?: return s
        case let other?: throw JobSpecError(field: field, "must be a string, not \(other.typeDescription)")
        }
    }

    private static func template(_ text: String, field: String) throws(JobSpecError) -> KindTemplate {
        do {
            return try KindTemplate(text)
        } catch {
            throw JobSpecError(field: field, error.description)
        }
    }

    private static func pointer(_ value: JSONValue?, field: String) throws(JobSpecError) -> JSONPointer {
        guard case .string(let text)? = value else {
            throw JobSpecError(field: field, "must be a JSON Pointer string, not \(value?.typeDescription ?? "missing")")
        }
        do {
            return try JSONPointer(text)
        } catch {
            throw JobSpecError(field: field, error.description)
        }
    }

    private static func decodeParameters(_ value: JSONValue?) throws(JobSpecError) -> [KindParameter] {
        guard let value, value != .null else { return [] }
        guard case .object(let members) = value else {
            throw JobSpecError(field: "parameters", "must be an object of name → {type, required, default, summary}")
        }
        guard members.count <= maxEntries else { throw JobSpecError(field: "parameters", "has more than \(maxEntries) entries") }
        var parameters: [KindParameter] = []
        for (name, spec) in members {
            let field = "parameters.\(name)"
            guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) else {
                throw JobSpecError(field: field, "is not a usable parameter name (letters, digits, '_' and '-')")
            }
            guard !JobDescriptor.commonFields.contains(name) else {
                throw JobSpecError(field: field, "is a field every job has; a kind cannot declare it")
            }
            guard !parameters.contains(where: { $0.name == name }) else { throw JobSpecError(field: field, "appears twice") }
            guard case .object(let specMembers) = spec else { throw JobSpecError(field: field, "must be an object") }
            for (key, _) in specMembers where !["type", "required", "default", "summary"].contains(key) {
                throw JobSpecError(field: "\(field).\(key)", "is not a field of a parameter (type, required, default, summary)")
            }
            let type: KindParameter.ValueType
            switch spec["type"] {
            case .string("string")?: type = .string
            case .string("int")?: type = .int
            case .string("number")?: type = .number
            case .string("bool")?: type = .bool
            default: throw JobSpecError(field: "\(field).type", "must be \"string\", \"int\", \"number\" or \"bool\"")
            }
            var required = false
            switch spec["required"] {
            case nil, .null?: break
            case .bool(let b)?: required = b
            default: throw JobSpecError(field: "\(field).required", "must be true or false")
            }
            let defaultValue = spec["default"].flatMap { $0 == .null ? nil : $0 }
            if let defaultValue {
                let fits: Bool
                switch (type, defaultValue) {
                case (.string, .string), (.number, .number), (.bool, .bool): fits = true
                case (.int, _): fits = defaultValue.intValue != nil
                default: fits = false
                }
                guard fits else { throw JobSpecError(field: "\(field).default", "must be of the parameter's type (\(type.rawValue))") }
                if required { throw JobSpecError(field: "\(field).default", "makes no sense for a required parameter") }
            }
            var summary = ""
            switch spec["summary"] {
            case nil, .null?: break
            case .string(let s)?: summary = s
            default: throw JobSpecError(field: "\(field).summary", "must be a string")
            }
            parameters.append(KindParameter(name: name, type: type, required: required, defaultValue: defaultValue, summary: summary))
        }
        return parameters
    }

    private static func decodeExec(_ value: JSONValue?) throws(JobSpecError) -> [String]? {
        guard let value, value != .null else { return nil }
        guard case .array(let items) = value, !items.isEmpty, items.count <= 256 else {
            throw JobSpecError(field: "exec", "must be a list of 1 to 256 strings: the program and its arguments")
        }
        var command: [String] = []
        for item in items {
            guard case .string(let s) = item, !s.utf8.contains(0), s.utf8.count <= 4096 else {
                throw JobSpecError(field: "exec", "must be a list of strings without NUL characters")
            }
            command.append(s)
        }
        guard !command[0].isEmpty else { throw JobSpecError(field: "exec", "names an empty program") }
        return command
    }

    private static func decodePayload(_ value: JSONValue?) throws(JobSpecError) -> (PayloadRule, [String]?) {
        guard let value, value != .null else { return (.bytes, nil) }
        guard case .object(let members) = value else { throw JobSpecError(field: "payload", "must be an object") }
        var rule: PayloadRule?
        var contentTypes: [String]?
        for (key, item) in members {
            switch key {
            case "json":
                guard case .string(let shape) = item, ["object", "array", "any"].contains(shape) else {
                    throw JobSpecError(field: "payload.json", "must be \"object\", \"array\" or \"any\"")
                }
                var required: [JSONPointer] = []
                if let list = value["require"], list != .null {
                    guard case .array(let items) = list, items.count <= maxEntries else {
                        throw JobSpecError(field: "payload.require", "must be a list of at most \(maxEntries) JSON Pointers")
                    }
                    for item in items { required.append(try pointer(item, field: "payload.require")) }
                }
                rule = .json(shape: shape, require: required)
            case "require":
                guard value["json"] != nil else { throw JobSpecError(field: "payload.require", "goes with \"json\"") }
            case "image":
                guard case .array(let items) = item, !items.isEmpty else {
                    throw JobSpecError(field: "payload.image", "must be a list of formats (png, jpeg, gif, webp, bmp)")
                }
                var formats: [ImageFormat] = []
                for item in items {
                    guard case .string(let s) = item, let format = ImageFormat(rawValue: s) else {
                        throw JobSpecError(field: "payload.image", "must be a list of formats (png, jpeg, gif, webp, bmp)")
                    }
                    formats.append(format)
                }
                rule = .image(formats)
            case "text":
                guard item == .bool(true) else { throw JobSpecError(field: "payload.text", "must be true") }
                rule = .text
            case "bytes":
                guard item == .bool(true) else { throw JobSpecError(field: "payload.bytes", "must be true") }
                rule = .bytes
            case "contentType":
                guard case .array(let items) = item, !items.isEmpty, items.count <= 64 else {
                    throw JobSpecError(field: "payload.contentType", "must be a list of media types")
                }
                var types: [String] = []
                for item in items {
                    guard case .string(let s) = item, !s.isEmpty else {
                        throw JobSpecError(field: "payload.contentType", "must be a list of media types")
                    }
                    types.append(s.lowercased())
                }
                contentTypes = types
            default:
                throw JobSpecError(field: "payload.\(key)", "is not a payload check (json, image, text, bytes, contentType)")
            }
        }
        let checks = members.filter { ["json", "image", "text", "bytes"].contains($0.key) }.count
        guard checks == 1, let rule else {
            throw JobSpecError(field: "payload", "must name exactly one check: json, image, text or bytes")
        }
        return (rule, contentTypes)
    }

    private static func decodeDetails(_ value: JSONValue?) throws(JobSpecError) -> [(name: String, detail: Detail)] {
        guard let value, value != .null else { return [] }
        guard case .object(let members) = value, members.count <= maxEntries else {
            throw JobSpecError(field: "details", "must be an object of at most \(maxEntries) name → pointer or {\"count\": pointer}")
        }
        var details: [(name: String, detail: Detail)] = []
        for (name, item) in members {
            let field = "details.\(name)"
            if name == "children" { throw JobSpecError(field: field, "is the runner's own count of children") }
            switch item {
            case .string:
                details.append((name, .value(try pointer(item, field: field))))
            case .object(let inner) where inner.count == 1 && inner[0].key == "count":
                details.append((name, .count(try pointer(inner[0].value, field: "\(field).count"))))
            default:
                throw JobSpecError(field: field, "must be a JSON Pointer or {\"count\": pointer}")
            }
        }
        return details
    }

    private static func decodeChildren(_ value: JSONValue?) throws(JobSpecError) -> (each: JSONPointer, job: [(key: String, value: JobTemplate)])? {
        guard let value, value != .null else { return nil }
        guard case .object(let members) = value else { throw JobSpecError(field: "children", "must be an object with 'each' and 'job'") }
        for (key, _) in members where key != "each" && key != "job" {
            throw JobSpecError(field: "children.\(key)", "is not a field of children (each, job)")
        }
        let each = try pointer(value["each"], field: "children.each")
        guard case .object(let job)? = value["job"] else {
            throw JobSpecError(field: "children.job", "must be a job object template")
        }
        var entries = 0
        var templates: [(key: String, value: JobTemplate)] = []
        for (key, item) in job {
            templates.append((key, try jobTemplate(item, field: "children.job.\(key)", depth: 1, entries: &entries)))
        }
        guard case .template(let kind)? = templates.first(where: { $0.key == "kind" })?.value, !kind.text.isEmpty else {
            throw JobSpecError(field: "children.job.kind", "is missing: a child job names its kind")
        }
        guard templates.contains(where: { $0.key == "url" }) else {
            throw JobSpecError(field: "children.job.url", "is missing: a child job has a URL")
        }
        return (each, templates)
    }

    private static func jobTemplate(_ value: JSONValue, field: String, depth: Int, entries: inout Int) throws(JobSpecError) -> JobTemplate {
        entries += 1
        guard entries <= maxEntries else { throw JobSpecError(field: "children.job", "has more than \(maxEntries) values") }
        guard depth <= maxTemplateDepth else {
            throw JobSpecError(field: field, "nests deeper than \(maxTemplateDepth) levels")
        }
        switch value {
        case .string(let text):
            return .template(try template(text, field: field))
        case .object(let members):
            var out: [(key: String, value: JobTemplate)] = []
            for (key, item) in members {
                out.append((key, try jobTemplate(item, field: "\(field).\(key)", depth: depth + 1, entries: &entries)))
            }
            return .object(out)
        case .array(let items):
            var out: [JobTemplate] = []
            for item in items { out.append(try jobTemplate(item, field: field, depth: depth + 1, entries: &entries)) }
            return .array(out)
        default:
            return .value(value)
        }
    }
}

extension KindFile {
    /// What can be judged only once every kind is known: a child job's `kind`, when written as
    /// is, names a kind, and each field of the child job is a job field or one of that kind's
    /// parameters. Throws naming the field, so a typo fails when kinds load, not silently at
    /// run time in every element.
    package func checkChildren(against registry: KindRegistry) throws(JobSpecError) {
        guard let children else { return }
        guard let kindName = children.job.first(where: { $0.key == "kind" })?.value.literal else { return }
        guard let child = registry.definition(named: kindName) else {
            throw JobSpecError(field: "children.job.kind", "names the kind '\(kindName)', which is not a kind (kinds: \(registry.names.joined(separator: ", ")))")
        }
        let known = Set(JobDescriptor.commonFields + child.parameters.map(\.name))
        for (key, _) in children.job where !known.contains(key) {
            let own = child.parameters.map(\.name)
            throw JobSpecError(
                field: "children.job.\(key)",
                "is neither a job field nor a parameter of the kind '\(kindName)' (its parameters: \(own.isEmpty ? "none" : own.joined(separator: ", ")))")
        }
    }
}

extension KindFile {
    /// An executable kind's program must exist and be executable: a name with a `/` in the kind
    /// file's folder (where the program runs), a bare name on `PATH`. Judged when kinds load, so
    /// a typo fails `kinds`, `validate` and `run` at once instead of every job at run time.
    package func checkProgram(environment: [String: String] = ProcessInfo.processInfo.environment) throws(JobSpecError) {
        guard let program = exec?.first else { return }
        if program.contains("/") {
            let path = program.hasPrefix("/") || directory.isEmpty ? program : "\(directory)/\(program)"
            if let problem = Self.runProblem(path) {
                throw JobSpecError(field: "exec", "names the program \(program), which \(problem) (a path with '/' is taken from the kind file's folder)")
            }
            return
        }
        let folders = (environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":").map(String.init)
        guard folders.contains(where: { Self.runProblem("\($0.isEmpty ? "." : $0)/\(program)") == nil }) else {
            throw JobSpecError(field: "exec", "names the program \(program), which is not an executable file in any folder of PATH")
        }
    }

    /// Why the file at `path` cannot be run, or nil.
    private static func runProblem(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return "does not exist" }
        guard (info.st_mode & S_IFMT) == S_IFREG else { return "is not a regular file" }
        guard access(path, X_OK) == 0 else { return "is not executable (chmod +x)" }
        return nil
    }
}

