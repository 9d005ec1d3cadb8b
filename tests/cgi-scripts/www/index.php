<?php
// Run by php-cgi through the `.php` suffix route: its source is never served.
header("X-Php: yes");
echo "php says ", 6 * 7, "\n";
echo "SCRIPT_NAME=", $_SERVER["SCRIPT_NAME"] ?? "", "\n";
echo "SCRIPT_FILENAME=", $_SERVER["SCRIPT_FILENAME"] ?? "", "\n";
echo "method=", $_SERVER["REQUEST_METHOD"] ?? "", "\n";
echo "name=", $_GET["name"] ?? "", "\n";
echo "posted=", $_POST["p"] ?? "", "\n";
echo "HTTP_PROXY=", var_export(getenv("HTTP_PROXY"), true), "\n";
