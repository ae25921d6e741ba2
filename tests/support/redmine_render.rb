# Render text snippets exactly as Redmine shows an issue description (ApplicationHelper#textilizable:
# formatter + macros + wiki/redmine links + heading anchors), in both text formats, in one Rails boot.
# Input: a JSON file [{"id": ..., "format": "textile"|"common_mark", "text": ...}] (path in ARGV[0]).
# Output: JSON {"id": html, ...} on stdout between marker lines.
# Setting.text_formatting is overridden in this process only, so the running server and other tests
# sharing its database never see the switch.
require "json"

snippets = JSON.parse(File.read(ARGV[0]))
project = Project.first || Project.create!(name: "anchorkit oracle", identifier: "anchorkit-oracle")
User.current = User.where(admin: true).first

controller = IssuesController.new
controller.request = ActionDispatch::TestRequest.create
view = controller.view_context
view.instance_variable_set(:@project, project)

current_format = nil
Setting.define_singleton_method(:text_formatting) { current_format }

rendered = {}
snippets.each do |snippet|
  current_format = snippet.fetch("format")
  attempts = 0
  begin
    rendered[snippet.fetch("id")] = view.textilizable(snippet.fetch("text"), project: project).to_s
  rescue ActiveRecord::StatementInvalid => e
    # The shared SQLite database is busy while the server or other tests write: wait and retry.
    attempts += 1
    if attempts < 50
      sleep 0.2
      retry
    end
    rendered[snippet.fetch("id")] = "<!-- redmine error: #{e.class}: #{e.message} -->"
  rescue StandardError => e
    rendered[snippet.fetch("id")] = "<!-- redmine error: #{e.class}: #{e.message} -->"
  end
end
puts "---ANCHORKIT-ORACLE-BEGIN---"
puts JSON.generate(rendered)
puts "---ANCHORKIT-ORACLE-END---"
