// libFuzzer target over the kind-file decoder: KindFile.decode on arbitrary bytes, then, for a
// file it accepts, the kind's definition decoding a job, its templates filled and its pointers
// resolved against the same bytes parsed as JSON. Built by run.sh over RunnerKinds' sources,
// linked with RunnerKit; not part of the package.
import Foundation
import RunnerKit

private let registry: KindRegistry = BuiltInKinds.registry()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKindFile(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let file: KindFile
    do {
        file = try KindFile.decode(bytes, path: "fuzz.json", fileStem: nil)
    } catch {
        if error.description.isEmpty || error.description.contains("\n") {
            fatalError("an error is not one line: \(error.description.debugDescription)")
        }
        return 0
    }
    var kinds = registry
    guard (try? kinds.register(file.definition())) != nil else { return 0 }
    let document = (try? JSONParser.parse(bytes)) ?? .null
    // A job of the kind with each parameter set to its default or a sample of its type.
    var fields: [(key: String, value: JSONValue)] = [("kind", .string(file.name)), ("url", .string("http://fuzz.test/{id}"))]
    for parameter in file.parameters {
        switch parameter.type {
        case .int: fields.append((parameter.name, .number(7)))
        case .number: fields.append((parameter.name, .number(1.5)))
        case .bool: fields.append((parameter.name, .bool(true)))
        default: fields.append((parameter.name, .string("a b/c")))
        }
    }
    do {
        let job = try JobDescriptor.decode(fields, registry: kinds)
        _ = job.key
    } catch {
        if error.description.contains("\n") { fatalError("an error is not one line: \(error.description.debugDescription)") }
    }
    _ = DeclarativeKind.details(file.details, in: document)
    if let children = file.children, case .array(let elements)? = children.each.resolve(in: document) {
        for element in elements.prefix(16) {
            for (_, template) in children.job {
                if case .template(let text) = template { _ = try? text.fill(parameters: ["id": "x"], element: element, encode: true) }
            }
        }
    }
    return 0
}
