<?php
// A PHP page for Stoa's FastCGI tests, served by php-fpm (an external
// pool) and by php-cgi (spawned by Stoa). Answers a text/plain report, one
// key=value per line; `sleep=MS` waits first, `code=N` sets the status.
$body = file_get_contents('php://input');
if (isset($_GET['sleep'])) {
    usleep((int)$_GET['sleep'] * 1000);
}
if (isset($_GET['code'])) {
    http_response_code((int)$_GET['code']);
}
header('Content-Type: text/plain');
header('X-Pid: ' . getmypid());
echo 'pid=', getmypid(), "\n";
echo 'lang=php', "\n";
echo 'sapi=', PHP_SAPI, "\n";
echo 'method=', $_SERVER['REQUEST_METHOD'], "\n";
echo 'query=', $_SERVER['QUERY_STRING'] ?? '', "\n";
echo 'content_length=', $_SERVER['CONTENT_LENGTH'] ?? '-', "\n";
echo 'body_len=', strlen($body), "\n";
echo 'body_crc32=', hash('crc32b', $body), "\n";
echo 'script_filename=', $_SERVER['SCRIPT_FILENAME'] ?? '', "\n";
echo 'script_name=', $_SERVER['SCRIPT_NAME'] ?? '', "\n";
echo 'request_uri=', $_SERVER['REQUEST_URI'] ?? '', "\n";
echo 'x=', $_GET['x'] ?? '', "\n";
echo 'cookie=', $_COOKIE['SESSIONID'] ?? '', "\n";
