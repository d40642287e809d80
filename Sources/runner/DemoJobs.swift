/// The demo's job files, built into the binary so that `runner demo` works from any folder and
/// from an installed binary. They are the files of Jobs/demo, byte for byte (a test compares
/// them): change both together.
enum DemoJobs {
    /// File name and content, in name order.
    static let files: [(name: String, text: String)] = [
        (
            "entries.jsonl",
            """
            {"defaults": {"kind": "entry", "url": "http://fixture.test/entries/{id}.json", "timeout": 2}}
            {"id": "imgly.A.1", "key": "entry:first"}
            {"id": "9e.A.1", "key": "entry:second"}
            """ + "\n"
        ),
        (
            "images.json",
            """
            {
              "defaults": {"timeout": 2, "retries": 1},
              "jobs": [
                {"kind": "image-list", "key": "image-list:demo", "url": "http://fixture.test/images.json", "output": "lists/demo.json"},
                {"kind": "image", "key": "image:logo", "url": "http://fixture.test/images/png.png"}
              ]
            }
            """ + "\n"
        ),
        (
            "tree.json",
            """
            {
              "kind": "tree",
              "key": "tree:imgly",
              "url": "http://fixture.test/data.json",
              "entries": "http://fixture.test/entries/{id}.json"
            }
            """ + "\n"
        ),
    ]
}
